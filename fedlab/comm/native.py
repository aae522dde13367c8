"""The count sketch's native passes (`count_sketch.c`), built once per machine with the system's C compiler and
loaded with ctypes.

The library is built into $FEDLAB_HOME/native/, named by a hash of its source, its flags and the machine's
architecture, so a changed source builds anew and processes share one build (written to a temporary name and
renamed into place). It is used only where it builds, the CPU has AVX2 and a check on a small sketch gives the
products' numbers; otherwise `library()` is None and the count sketch keeps its products, the reason said once
on stderr. `$CC` names the compiler (default `cc`; a command with arguments, such as `ccache gcc`, is split as
a shell would)."""
from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import platform
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

SOURCE = Path(__file__).with_name("count_sketch.c")
FLAGS = ("-O3", "-mavx2", "-ffp-contract=off", "-shared", "-fPIC")
_STATE: dict = {}


@functools.cache
def _version(compiler: str) -> str:
    """The first line of `compiler --version` ('' when it does not answer)."""
    try:
        done = subprocess.run([*shlex.split(compiler), "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return ""
    return (done.stdout.strip().splitlines() or [""])[0]


def target(compiler: str) -> Path:
    """Where the library for this source, compiler (and its version), flags and architecture lives:
    $FEDLAB_HOME/native/."""
    from fedlab.home import fedlab_home

    named = " ".join((compiler, _version(compiler)) + FLAGS + (platform.machine(),)).encode()
    return fedlab_home() / "native" / f"count_sketch-{hashlib.sha256(SOURCE.read_bytes() + named).hexdigest()[:16]}.so"


def _built(compiler: str) -> Path:
    """The library at `target(compiler)`, built there when missing."""
    target_ = target(compiler)
    if target_.exists():
        return target_
    folder = target_.parent
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=target_.stem + ".", suffix=".so.tmp", dir=folder)
    os.close(fd)
    try:
        done = subprocess.run([*shlex.split(compiler), *FLAGS, "-o", tmp, str(SOURCE)], capture_output=True, text=True,
                              timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"{compiler} failed: {(done.stderr.strip().splitlines() or ['no message'])[0]}")
        os.chmod(tmp, 0o755)          # readable by whoever shares this FEDLAB_HOME, as the compiler's own output is
        os.replace(tmp, target_)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target_


def _bind(lib: ctypes.CDLL) -> ctypes.CDLL:
    p, i = ctypes.c_void_p, ctypes.c_int64
    for name in ("cs_compress_y1", "cs_compress_y3"):
        getattr(lib, name).argtypes, getattr(lib, name).restype = [p, i, i, p, p, i, p], ctypes.c_int
    for name in ("cs_decompress_y1", "cs_decompress_y3"):
        getattr(lib, name).argtypes, getattr(lib, name).restype = [p, i, i, p, i, p], ctypes.c_int
    lib.cs_has_avx2.argtypes, lib.cs_has_avx2.restype = [], ctypes.c_int
    return lib


def library(agrees=None) -> ctypes.CDLL | None:
    """The loaded library, or None where it cannot be built or used here (said once per process on stderr).
    `agrees(lib)`, checked once when given (`fedlab.comm.sketch` passes its check against the products), must
    hold for the library to be used."""
    if "lib" not in _STATE:
        compiler = os.environ.get("CC") or "cc"
        lib, why = None, ""
        try:
            if platform.machine().lower() not in ("x86_64", "amd64"):
                raise RuntimeError(f"AVX2 passes, {platform.machine()} CPU")
            lib = _bind(ctypes.CDLL(str(_built(compiler))))
            if not lib.cs_has_avx2():
                lib, why = None, ": this CPU has no AVX2"
            elif agrees is not None and not agrees(lib):
                lib, why = None, ": a check on a small sketch gave other numbers than the products"
        except Exception as e:  # no compiler, a failed build, another platform: the products run instead
            lib, why = None, f": {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        _STATE["lib"], _STATE["said"] = lib, f"{'on' if lib else 'off, the products run' + why}"
        print(f"[fedlab] count sketch native passes: {_STATE['said']}", file=sys.stderr)
    return _STATE["lib"]


def status(agrees=None) -> str:
    """'on', or 'off, the products run: <why>' (`fedlab doctor`; loads the library first, as `library`)."""
    library(agrees)
    return _STATE["said"]


def forget() -> None:
    """Forget the loaded library and the outcome (tests)."""
    _STATE.clear()


def _tables(sk) -> tuple:
    """(off, flip, soff) data pointers of `sk`'s index-major int32 [D, Y] tables for the kernels (count_sketch.c),
    the tables themselves kept beside them on the sketch."""
    import torch

    if getattr(sk, "_native", None) is None:
        slot = torch.arange(sk.rows)[:, None] * sk.cols + sk.buckets                # [Y, D]
        negative = sk.signs < 0
        k8 = -(-sk.rows * sk.cols // 8) * 8
        tables = tuple(t.t().contiguous().to(torch.int32) for t in (
            slot * 8, torch.where(negative, -2**31, 0), torch.where(negative, (slot + k8) * 8, slot * 8)))
        sk._native = (tables, tuple(t.data_ptr() for t in tables))
    return sk._native[1]


def _check(code: int, what: str) -> None:
    if code != 0:
        raise MemoryError(f"count sketch {what}: no memory for a tile buffer")


def compress(sk, x, lib: ctypes.CDLL):
    """x [..., D] float32 → S [..., Y, Z] (Eq. 12) by the native pass; Y ∈ {1, 3}."""
    import torch

    x = x if x.is_contiguous() else x.contiguous()
    off, flip, _ = _tables(sk)
    out = torch.empty(x.shape[:-1] + (sk.rows, sk.cols), dtype=torch.float32)
    fn = lib.cs_compress_y3 if sk.rows == 3 else lib.cs_compress_y1
    _check(fn(x.data_ptr(), x.numel() // sk.dim, sk.dim, off, flip, sk.rows * sk.cols, out.data_ptr()), "compress")
    return out


def decompress(sk, s, lib: ctypes.CDLL):
    """S [..., Y, Z] float32 → x̂ [..., D] (Eq. 13) by the native pass; Y ∈ {1, 3}."""
    import torch

    s = s if s.is_contiguous() else s.contiguous()
    soff = _tables(sk)[2]
    out = torch.empty(s.shape[:-2] + (sk.dim,), dtype=torch.float32)
    k = sk.rows * sk.cols
    fn = lib.cs_decompress_y3 if sk.rows == 3 else lib.cs_decompress_y1
    _check(fn(s.data_ptr(), s.numel() // k, k, soff, sk.dim, out.data_ptr()), "decompress")
    return out
