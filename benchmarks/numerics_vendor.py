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

    python benchmarks/numerics_vendor.py --out benchmarks/results/numerics_vendor.md

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


def cpuid_faulting() -> bool:
    try:
        return "cpuid_fault" in Path("/proc/cpuinfo").read_text().split()
    except OSError:
        return False


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="also write the report as a generated Markdown page here")
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
    if args.out:
        report.write(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
