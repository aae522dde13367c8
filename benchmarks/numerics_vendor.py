"""Why a CPU of one vendor does not compute another vendor's bits under fedlab's pin, and a candidate for numerics
that the vendor does not change.

Fresh pinned processes (`fedlab.numerics`) print the digest (`fedlab.numerics.digest`, 1 and 2 threads) and how
many of a fixed set of square roots `torch.sqrt` rounds correctly (`fedlab.numerics.sqrt_rounding`), under:

1. the pin as it is, on this CPU;
2. the pin, with every CPUID instruction answered as an AMD EPYC (Zen 2) would (`numerics_vendor/cpuid_amd.c`,
   CPUID faulting): every library sees an AMD CPU, while the arithmetic is still this CPU's;
3. the pin, with MKL on its non-Intel Zen path (`numerics_vendor/mkl_non_intel.c`) and the single-precision
   vector math ATen calls from MKL computed in double precision and rounded once (`numerics_vendor/vml_rounded.c`);
4. 3's vector math with 2's CPUID.

2 differing from the reference kind's digest (an AMD EPYC) says what is left when every library takes the AMD
path: the CPU's own arithmetic. 3 and 4 printing one digest says that, with the vector math rounded once, this CPU
and an AMD-identified one run the same kernels to the same bits: a candidate for a pin no vendor changes (to be
confirmed on an AMD CPU, where 3 should print that digest too).

    python benchmarks/numerics_vendor.py --zoo pico-llama,pico-gpt2,pico-opt,pico-bloom,pico-qwen2,pico-bert \
        --out benchmarks/results/numerics_vendor.md

`--zoo` also pretrains those zoo models from their recipes under 3 and 4 (`fedlab zoo build NAME --rebuild` in an
empty `FEDLAB_HOME`) and compares the weights' sha256: the zoo's own operations beyond the digest's (GPT-2's GELU,
Bloom's ALiBi, BERT's masked LM, ...).

Needs a C compiler; rows 2 and 4 need Linux's CPUID faulting (`cpuid_fault` in /proc/cpuinfo)."""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _common import Report, last_line, table  # noqa: E402

SOURCES = HERE / "numerics_vendor"
CHILD = ("import json; from fedlab import numerics; import torch; "
         "print(json.dumps({'capability': torch.backends.cpu.get_cpu_capability(), "
         "'digest': [numerics.digest(1), numerics.digest(2)], 'sqrt': numerics.sqrt_rounding()[0]}))")


def build(name: str, out: Path) -> Path:
    """`numerics_vendor/<name>.c` compiled to a shared library in `out`."""
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if cc is None:
        sys.exit("numerics_vendor: no C compiler (cc or gcc) on PATH: install one (apt-get install gcc)")
    lib = out / f"{name}.so"
    p = subprocess.run([cc, "-shared", "-fPIC", "-O2", "-o", str(lib), str(SOURCES / f"{name}.c"), "-lm"],
                       capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"numerics_vendor: {name}.c does not compile: {last_line(p.stderr)}")
    return lib


def measure(preload: list[Path]) -> dict:
    """The child's numbers in a fresh process with `preload` loaded first."""
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "FEDLAB_NUMERICS")}
    if preload:
        env["LD_PRELOAD"] = ":".join(map(str, preload))
    p = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"numerics_vendor: the measuring process failed: {last_line(p.stderr)}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def zoo_weights(name: str, preload: list[Path]) -> tuple[str, str]:
    """(the sha256 prefixes of `name`'s weights and of its tokenizer file) pretrained in a fresh process with
    `preload`, in an empty fedlab home."""
    with tempfile.TemporaryDirectory() as home:
        env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "FEDLAB_NUMERICS")}
        env.update(FEDLAB_HOME=home, LD_PRELOAD=":".join(map(str, preload)))
        p = subprocess.run([sys.executable, "-m", "fedlab.cli", "zoo", "build", name, "--rebuild"],
                           capture_output=True, text=True, env=env)
        meta = Path(home) / "zoo" / name / "meta.json"
        if p.returncode != 0 or not meta.is_file():
            sys.exit(f"numerics_vendor: zoo build {name} failed: {last_line(p.stderr or p.stdout)}")
        m = json.loads(meta.read_text())
        return m["weights_sha256"][:12], m["files"]["tokenizer.json"]["sha256"][:12]


def cpuid_faulting() -> bool:
    try:
        return "cpuid_fault" in Path("/proc/cpuinfo").read_text().split()
    except OSError:
        return False


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="also write the report as a generated Markdown page here")
    ap.add_argument("--zoo", default="", help="comma-separated zoo models to pretrain under settings 3 and 4")
    args = ap.parse_args(argv)
    from fedlab import numerics

    report = Report("benchmarks/numerics_vendor.py")
    ref = numerics.reference() or {}
    with tempfile.TemporaryDirectory() as tmp:
        amd, mkl, vml = (build(n, Path(tmp)) for n in ("cpuid_amd", "mkl_non_intel", "vml_rounded"))
        emulate = cpuid_faulting()
        settings = [("1. the pin, this CPU", []),
                    ("2. the pin, CPUID of an AMD EPYC (Zen 2)", [amd]),
                    ("3. the pin, MKL's non-Intel path, vector math rounded once", [mkl, vml]),
                    ("4. as 3, CPUID of an AMD EPYC (Zen 2)", [amd, vml])]
        rows, got = [], {}
        for name, preload in settings:
            if amd in preload and not emulate:
                rows.append([name, "-", "-", "-", "-", "no CPUID faulting on this CPU"])
                continue
            m = got[name] = measure(preload)
            d1, d2 = m["digest"]
            rows.append([name, m["capability"], d1, d2, f"{m['sqrt']} of {numerics.SQRT_VALUES}",
                         "yes" if ref and d1 == ref.get(1) and d2 == ref.get(2) else "no"])
        zoo = [z.strip() for z in args.zoo.split(",") if z.strip()]
        built = [(z, zoo_weights(z, settings[2][1]), zoo_weights(z, settings[3][1]) if emulate else None)
                 for z in zoo]
    report.emit(f"The reference kind's digest: {ref.get(1, 'none measured for these library versions')}.")
    report.emit("")
    report.emit(table(rows, ["setting", "ATen", "digest, 1 thread", "digest, 2 threads", "torch.sqrt correctly rounded",
                             "the reference's"]))
    three, four = got.get(settings[2][0]), got.get(settings[3][0])
    if three and four:
        same = three["digest"] == four["digest"]
        report.emit("")
        report.emit("3 and 4 " + ("print one digest: with the vector math rounded once, this CPU and an AMD-identified "
                                  "one compute the same bits." if same else
                                  "differ: something besides the vector math still follows the CPU's identity."))
    if built:
        report.emit("")
        report.emit("Zoo models pretrained from their recipes under 3 and 4 (weights sha256, first 12 hex digits):")
        report.emit("")
        def verdict(a, b):
            if b is None:
                return "-"
            if a[1] != b[1]:
                return "- (the tokenizers trained differ: a per-process vocabulary order, not the CPU)"
            return "yes" if a[0] == b[0] else "no"

        report.emit(table([[z, a[0], b[0] if b else "-", verdict(a, b)] for z, a, b in built],
                          ["model", "3: this CPU", "4: AMD's CPUID", "equal"]))
    if args.out:
        report.write(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
