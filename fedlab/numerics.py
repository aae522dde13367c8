"""Pinned CPU numerics: the same weights train the same way on every x86-64 CPU of one kind.

PyTorch picks its CPU kernels at run time by the instruction set the CPU offers: ATen's vectorised kernels
(AVX-512 on Intel servers, AVX2 on AMD ones), MKL's GEMM and oneDNN's primitives each have a code path per
instruction set, and the paths sum in other orders — the same float code gives other bits on each kind of
machine. fedlab pins all three to AVX2, which every current x86-64 server has, *before torch is imported*
(`fedlab/__init__.py` calls `apply_env` first thing):

    ATEN_CPU_CAPABILITY=avx2      ATen's dispatch (read at the first kernel call)
    MKL_CBWR=AVX2,STRICT          MKL's conditional numerical reproducibility: the AVX2 branch, and sums
                                  that do not depend on buffer alignment (i.e. on what a process ran before)
    ONEDNN_MAX_CPU_ISA=AVX2       oneDNN's highest instruction set

`FEDLAB_NUMERICS=native` (or the config key `numerics: native`, which `fedlab run` turns into the variable by
starting itself again) opts out: the CPU's fastest kernels, with MKL still alignment-independent
(`MKL_CBWR=AUTO,STRICT`). The mode in force is recorded with every run (`environment()`).

Threads: a run's torch threads are `backend.threads` (set per client and on the server), the zoo builds on one
thread; both are part of the record. `digest()` is the computation of `shared/tools/numerics_digest.py`;
`REFERENCE` holds its value measured on the reference machine (AMD EPYC, AVX2) with torch 2.13.0 and
transformers 5.23.0: a machine whose digest equals it computes fedlab's operations bit for bit alike.

A machine kind that prints another digest under the pin computes other bits (`OTHER_KINDS` lists those
measured). Its digest becomes part of the numerics fingerprint of what it records (`fingerprint`), so each record
names the kind that computed it (`kind_of`), and its digits reproduce on machines of that kind. The records of
every *measured* kind (`measured_fingerprints`) are current on every machine, and the tables read them alike, on
the assumption that a seed made on one kind is a draw from the same distribution as one made on another (training
carries a kind's last bits as far as it carries any rounding: `make_tables.py --kind-check` measures how far,
docs/reproducibility.md); a spot-check re-runs only the records of this machine's kind. Records of
unmeasured numerics (another mode, unmeasured library versions or CPU kind) are current only where they were
made.

This module imports torch (and fedlab.validation) only inside functions: fedlab/__init__.py runs it first.
"""
from __future__ import annotations

import functools
import os
import platform
import sys

PIN = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2,STRICT", "ONEDNN_MAX_CPU_ISA": "AVX2"}
NATIVE = {"MKL_CBWR": "AUTO,STRICT"}
MODES = ("pinned", "native")
ENV = "FEDLAB_NUMERICS"
JUDGE_ENV = "FEDLAB_JUDGE_NUMERICS"
JUDGES = ("here", "reference")
# The instruction set ATen reports when the pin is in force (torch.backends.cpu.get_cpu_capability()).
PINNED_CAPABILITY = "AVX2"

# numerics_digest.py on the reference machine: {(torch, transformers): {threads: digest}}
REFERENCE = {("2.13.0", "5.23.0"): {1: "62d2cfb4ab83cc70", 2: "62d2cfb4ab83cc70"}}
# the kind name of the reference digests; a record made before machines recorded their digest is named so only
# where its CPU is an AMD EPYC (every such record was made on one, and those re-made on the reference kind agree)
REFERENCE_KIND = "AMD EPYC (the reference)"
# numerics_digest.py on machine kinds measured to compute other bits under the pin: {(torch, transformers):
# {digest: kind}}. On them the pin still makes a run's bits independent of its thread count (1 and 2 alike).
OTHER_KINDS = {("2.13.0", "5.23.0"): {"052f5b469bc23f44": "Intel Xeon (AVX-512)"}}


def mode() -> str:
    """The numerics mode this process was started in: $FEDLAB_NUMERICS, default 'pinned'."""
    m = os.environ.get(ENV, "pinned").strip().lower() or "pinned"
    return m if m in MODES else "invalid"


def check_mode() -> None:
    """Raise ConfigError (one line) when $FEDLAB_NUMERICS holds a value other than pinned / native."""
    from fedlab.validation import ConfigError

    if mode() == "invalid":
        raise ConfigError(f"environment variable {ENV}={os.environ.get(ENV)!r} is not allowed; allowed: "
                         f"{', '.join(MODES)}")


def apply_env() -> None:
    """Set the numerics variables of this process's mode (before torch is imported). Pinned mode overrides
    a user's own values of the three variables (that is what the pin is); native mode leaves them alone."""
    if mode() == "native":
        for k, v in NATIVE.items():
            os.environ.setdefault(k, v)
    elif mode() == "pinned":
        os.environ.update(PIN)


def capability() -> str:
    """The instruction set ATen dispatches to in this process (computing it fixes it for the process)."""
    import torch

    return str(torch.backends.cpu.get_cpu_capability())


def in_force() -> bool:
    """Whether this process computes as its mode says: in pinned mode ATen dispatches to AVX2 (false when
    torch ran a kernel before fedlab was imported, on a CPU whose default is another instruction set)."""
    return mode() != "pinned" or capability() == PINNED_CAPABILITY


@functools.lru_cache(maxsize=1)
def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo on Linux) and its widest vector instruction set."""
    info = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                info.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    flags = info.get("flags", "").split()
    isa = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX2" if flags else "?"
    return f"{info.get('model name') or platform.processor() or platform.machine()} ({isa})"


def environment(threads: int | None = None) -> dict:
    """What a run's numbers depend on besides its config and weights: CPU, instruction set in force, mode,
    the pinned variables' values, threads, library versions."""
    import tokenizers
    import torch
    import transformers

    return {"cpu": cpu_model(), "capability": capability(), "numerics": mode(), "in_force": in_force(),
            "env": {k: os.environ.get(k) for k in PIN},
            "threads": threads if threads is not None else torch.get_num_threads(),
            "python": sys.version.split()[0], "torch": torch.__version__,
            "transformers": transformers.__version__, "tokenizers": tokenizers.__version__}


def fingerprint(env: dict) -> str:
    """The part of `environment()` that decides the bits of a computation: instruction set in force, mode and
    library versions (the CPU's name and the thread count are recorded beside it; threads are part of a run's
    config), and `digest=…` where `env["digest"]` (the machine's `digest`, `with_digest`) is not the reference
    machine's for these library versions, or no reference was measured for them. Two records with equal
    fingerprints were computed by the same kernels."""
    keys = ("capability", "numerics", "torch", "transformers", "tokenizers")
    out = "|".join(str(env.get(k)) for k in keys)
    d = env.get("digest")
    ref = REFERENCE.get(_versions(env.get("torch"), env.get("transformers")))
    return out + (f"|digest={d}" if d and not (ref and d in ref.values()) else "")


def _versions(torch_version, transformers_version) -> tuple[str, str]:
    """The key of REFERENCE and OTHER_KINDS: torch's version without its build tag, transformers' version."""
    return str(torch_version).split("+")[0], str(transformers_version)


@functools.lru_cache(maxsize=1)
def machine_digest() -> str:
    """This process's `digest` at one thread (computed once: 3 to 6 s; under the pin the bits do not depend on
    the thread count, which the reference and every measured kind show at 1 and 2 threads)."""
    return digest(1)


def is_reference_kind() -> bool:
    """Whether this machine computes like the reference machine: its digest is the reference's for this
    process's torch and transformers (False where none was measured)."""
    return machine_digest() in (reference() or {}).values()


def is_measured_kind() -> bool:
    """Whether this machine computes like a measured kind (the reference or one of `OTHER_KINDS`) under the pin:
    its records are then current on every machine."""
    return this_kind() is not None


def this_kind() -> str | None:
    """The measured kind this process computes as (`REFERENCE_KIND` or a name from `OTHER_KINDS`), None in native
    mode, where the pin is not in force, or on a kind not measured."""
    return _measured(*_versions_now()).get(machine_digest()) if mode() == "pinned" and in_force() else None


def here_words() -> str:
    """Why this machine's records are current only here, in words: native mode, the pin not in force, or a digest
    of no measured kind."""
    if mode() != "pinned":
        return f"{ENV}={mode()}: records made in that mode are current only on this machine"
    if not in_force():
        return "the pin is not in force (torch ran before fedlab was imported)"
    return f"numerics digest {machine_digest()}, of no measured kind"


def _versions_now() -> tuple[str, str]:
    import torch
    import transformers

    return _versions(torch.__version__, transformers.__version__)


def _measured(torch_version: str, transformers_version: str) -> dict[str, str]:
    """{digest: kind} of every kind measured under the pin with these library versions, the reference first."""
    key = (torch_version, transformers_version)
    return {**{d: REFERENCE_KIND for d in REFERENCE.get(key, {}).values()}, **OTHER_KINDS.get(key, {})}


@functools.lru_cache(maxsize=1)
def measured_fingerprints() -> dict[str, str]:
    """{numerics fingerprint: kind} of a pinned run on every measured kind with this process's libraries: the
    records whose fingerprint is one of these are current on every machine (`records.stale_numerics`)."""
    env = {**environment(), "capability": PINNED_CAPABILITY, "numerics": "pinned"}
    return {fingerprint({**env, "digest": d}): kind for d, kind in _measured(*_versions_now()).items()}


def kind_of(env: dict | None) -> str | None:
    """The measured kind whose pinned numerics made a record with environment `env`, read from its
    `numerics_fingerprint` (`fingerprint`: instruction set, mode, library versions, and `digest=…` where the
    machine's is not the reference's): `REFERENCE_KIND` or a name from `OTHER_KINDS`; None for unmeasured
    numerics, a record without an environment, and one that records no machine digest and names a CPU other than
    an AMD EPYC (code older than the digest in the fingerprint wrote the reference's fingerprint on every kind)."""
    env = env or {}
    then = env.get("numerics_fingerprint")
    if not then or (env.get("digest") is None and env.get("cpu") and not str(env["cpu"]).startswith("AMD")):
        return None
    parts = str(then).split("|")
    if len(parts) not in (5, 6) or parts[:2] != [PINNED_CAPABILITY, "pinned"]:
        return None
    versions = _versions(parts[2], parts[3])
    if len(parts) == 5:
        return REFERENCE_KIND if REFERENCE.get(versions) else None
    digest = parts[5].removeprefix("digest=")
    return None if digest in REFERENCE.get(versions, {}).values() else _measured(*versions).get(digest)


def with_digest(env: dict) -> dict:
    """`env` with this machine's digest added (`digest`), which `fingerprint` reads."""
    return {**env, "digest": machine_digest()}


def other_kind(d: str) -> str | None:
    """The machine kind measured to print digest `d` under the pin with these libraries (`OTHER_KINDS`)."""
    return OTHER_KINDS.get(_versions_now(), {}).get(d)


def judge_as() -> str:
    """Whose numerics a record is judged current against (`current_fingerprint`): $FEDLAB_JUDGE_NUMERICS, `here`
    (the default: this machine's, as a run here would compute) or `reference` (the reference machine kind's:
    renders the shipped results pages on a machine of no measured kind as they render on a measured one; nothing
    can run under it). A bad
    value is a ConfigError naming the allowed ones."""
    from fedlab.validation import ConfigError

    value = os.environ.get(JUDGE_ENV, "here").strip().lower() or "here"
    if value not in JUDGES:
        raise ConfigError(f"environment variable {JUDGE_ENV}={os.environ.get(JUDGE_ENV)!r} is not allowed; "
                          f"allowed: {', '.join(JUDGES)}")
    return value


def current_fingerprint() -> str:
    """`fingerprint` of this process's environment with this machine's digest (or, under
    FEDLAB_JUDGE_NUMERICS=reference, the reference machine's: `judge_as`)."""
    return _fingerprint_judged(judge_as())


@functools.lru_cache(maxsize=2)
def _fingerprint_judged(judge: str) -> str:
    """Fixed once torch has dispatched its first kernel; the digest is computed once (`machine_digest`). The
    reference view is the reference machine's own: pinned, AVX2 in force, its digest, this process's libraries."""
    from fedlab.validation import ConfigError

    env = environment()
    if judge == "reference":
        ref = reference()
        if not ref:
            raise ConfigError(f"{JUDGE_ENV}=reference: no reference digest was measured for torch {env['torch']} "
                              f"and transformers {env['transformers']} (fedlab/numerics.py REFERENCE)")
        return fingerprint({**env, "capability": PINNED_CAPABILITY, "numerics": "pinned", "digest": ref[1]})
    return fingerprint(with_digest(env))


def digest(threads: int) -> str:
    """sha256 prefix of a fixed computation: a matmul, a Linear + softmax and three AdamW steps of a small
    random LLaMA (the operations of the zoo's pretraining and of every run); equal digests = equal bits.
    The same computation as shared/tools/numerics_digest.py."""
    import hashlib

    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        gpus = list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []
        with torch.random.fork_rng(devices=gpus), torch.inference_mode(False), torch.enable_grad():
            torch.manual_seed(0)
            h = hashlib.sha256()
            a, b = torch.randn(512, 777), torch.randn(777, 301)
            h.update((a @ b).numpy().tobytes())
            lin = torch.nn.Linear(777, 301)
            h.update(torch.softmax(lin(a), -1).detach().numpy().tobytes())
            cfg = LlamaConfig(vocab_size=1000, hidden_size=96, intermediate_size=256, num_hidden_layers=2,
                              num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=128)
            torch.manual_seed(0)
            model = LlamaForCausalLM(cfg)
            opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
            ids = torch.randint(0, 1000, (8, 64), generator=torch.Generator().manual_seed(1))
            for _ in range(3):
                loss = model(input_ids=ids, labels=ids).loss
                loss.backward()
                opt.step()
                opt.zero_grad()
            for p in model.parameters():
                h.update(p.detach().numpy().tobytes())
            return h.hexdigest()[:16]
    finally:
        torch.set_num_threads(before)


def reference() -> dict[int, str] | None:
    """The reference digests for this process's torch and transformers versions (None when not measured)."""
    return REFERENCE.get(_versions_now())


SQRT_VALUES = 4096       # the values `sqrt_rounding` takes the square root of


def sqrt_rounding(sqrt=None) -> tuple[int, int]:
    """(how many of `SQRT_VALUES` fixed float32 values `sqrt` — default `torch.sqrt` — returns correctly rounded,
    `SQRT_VALUES`). The correctly rounded root is the double-precision root rounded to float32 (exact for a square
    root: 53 ≥ 2·24 + 2 bits). MKL's vector math, which `torch.sqrt` calls, rounds every one correctly on an Intel
    CPU; on a CPU it does not take for Intel's, MKL takes its non-Intel path, whose single-precision square root
    was seen (under an emulated AMD CPUID) to start from the CPU's approximate reciprocal square root, and then
    not every result is correctly rounded (docs/reproducibility.md)."""
    import numpy as np
    import torch

    x = torch.linspace(1.0, 1000.0, SQRT_VALUES)
    got = (sqrt or torch.sqrt)(x).numpy()
    return int((got == np.sqrt(x.numpy().astype(np.float64)).astype(np.float32)).sum()), SQRT_VALUES


def report() -> tuple[list[str], bool]:
    """(lines for `fedlab doctor`, whether this machine computes like the reference)."""
    env = environment()
    ref = reference()
    lines = [f"cpu: {env['cpu']}", f"numerics: {env['numerics']} (ATen dispatches to {env['capability']}"
             + ("" if env["in_force"] else "; the pin is NOT in force: torch ran before fedlab was imported") + ")",
             "variables: " + " ".join(f"{k}={v}" for k, v in env["env"].items()),
             f"torch {env['torch']}, transformers {env['transformers']}, tokenizers {env['tokenizers']}"]
    same = True
    for t in (1, 2):
        d = digest(t)
        want = (ref or {}).get(t)
        same &= d == want
        kind = other_kind(d) if want is not None and d != want else None
        verdict = ("no reference for these library versions" if want is None else
                   "equal to the reference" if d == want else f"DIFFERS from the reference {want}"
                   + (f"; measured before on: {kind}, pinned, at 1 and 2 threads" if kind else ""))
        lines.append(f"digest threads={t}: {d} ({verdict})")
    exact, n = sqrt_rounding()
    lines.append(f"torch.sqrt: correctly rounded in {exact} of {n} values"
                 + ("" if exact == n else
                    " (as when MKL's vector math takes its non-Intel path: docs/reproducibility.md)"))
    kind = this_kind()
    lines.append("this machine computes fedlab's operations like the reference machine (AMD EPYC, AVX2): records "
                 "made on the reference kind reproduce here to the last digit" if same else
                 f"this machine computes like the measured kind {kind}, not like the reference machine: records made "
                 "on its kind reproduce here to the last digit, the reference kind's differ in the last digits or "
                 "more; the records of every measured kind are current on every machine and the tables read them "
                 "alike (each record names its kind; docs/reproducibility.md)" if kind else
                 "this machine does not compute like the reference machine or any measured kind: recorded numbers "
                 "may differ in the last digits or more (FEDLAB_NUMERICS=native, another torch/transformers, or a "
                 "CPU of another vendor, on which MKL runs other kernels and its vector math other "
                 "approximations); records made here carry that in their numerics fingerprint and are current "
                 "only here" + ("" if mode() != "pinned" or not in_force() else
                                " until this kind's digest is measured into fedlab/numerics.py OTHER_KINDS"))
    return lines, same
