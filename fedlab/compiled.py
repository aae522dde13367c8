"""Whether fedlab's fused kernels (`fedlab.aggregators.fused`, and the count sketch's native passes in
`fedlab.comm.sketch`) run, chosen once per process and logged on stderr.

`FEDLAB_FUSED_KERNELS`: `auto` (the default: each kernel fuses from its own size on, where the one-off compile
pays for itself, if compiling works on this machine), `on` (every size: tests), `off` (the eager kernels
only). Fused kernels run on the CPU, in float32 and float64, only. Compiling is checked once per process by
compiling and running a small function; when it fails (no C++ compiler, an unsupported platform) the eager
kernels run and the log line says why."""
from __future__ import annotations

import os
import sys

import torch

from fedlab.validation import ConfigError

_STATE: dict = {}


def mode() -> str:
    """'auto' | 'on' | 'off' from FEDLAB_FUSED_KERNELS (read once per process), a bad value named in one line
    (a ConfigError: the run's preflight asks first, so a bad value stops a run before it starts)."""
    if "mode" not in _STATE:
        value = os.environ.get("FEDLAB_FUSED_KERNELS", "auto").strip().lower()
        if value not in ("auto", "on", "off"):
            raise ConfigError(f"FEDLAB_FUSED_KERNELS: {value!r} is not allowed; allowed: auto, on, off")
        _STATE["mode"] = value
    return _STATE["mode"]


def set_mode(value: str | None) -> None:
    """Set the mode for this process (None: forget it and whether compiling works; tests, benchmarks)."""
    if value is None:
        _STATE.clear()
    elif value not in ("auto", "on", "off"):
        raise ValueError(f"fused kernels mode: {value!r} is not allowed; allowed: auto, on, off")
    else:
        _STATE["mode"] = value


def compiles() -> bool:
    """Compile-and-run a small function once; the outcome (and why not) is logged once per process."""
    if "ok" not in _STATE:
        try:   # a function of its own: each kernel's first compile takes its size hints from a real input
            x = torch.tensor([[1.0, -2.0, 0.5], [-1.0, 3.0, 0.25]])
            got = torch.compile(lambda t: (t.abs() > 0.3).to(t.dtype).mul(t).sum(0))(x)
            _STATE["ok"] = bool(torch.equal(got, torch.tensor([0.0, 1.0, 0.5])))
            why = "" if _STATE["ok"] else ": a compiled check gave wrong values"
        except Exception as e:  # no compiler, an unsupported platform: the eager kernels run instead
            _STATE["ok"], why = False, f": {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        print(f"[fedlab] fused kernels: {'on (torch.compile)' if _STATE['ok'] else 'off, eager kernels' + why}",
              file=sys.stderr)
    return _STATE["ok"]


def wanted(t: torch.Tensor, size: int, min_size: int) -> bool:
    """Whether a kernel on `t` whose work is `size` (its own measure) and that fuses from `min_size` on in
    `auto` takes its fused path: float32 or float64 on the CPU only (the generated C++ is what the tests and
    benchmarks check; on an accelerator the kernels' own device paths run, and in bfloat16/float16 the
    generated code keeps float32 intermediates where the eager kernels round after every operation)."""
    if t.device.type != "cpu" or t.dtype not in (torch.float32, torch.float64):
        return False
    m = mode()
    if m == "off" or (m == "auto" and size < min_size):
        return False
    return compiles()


def run_or_fall_back(name: str, fused, eager):
    """fused() — or, if compiling or running it fails (a shape or platform the check did not cover), eager()
    from then on for `name`, said once on stderr."""
    if _STATE.get(f"failed/{name}"):
        return eager()
    try:
        return fused()
    except Exception as e:   # the eager kernel is always correct: fall back, say why once
        _STATE[f"failed/{name}"] = True
        print(f"[fedlab] fused {name} failed ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}); "
              "the eager kernel runs instead", file=sys.stderr)
        return eager()
