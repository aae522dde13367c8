"""Two fedlab runs at once on one machine against one alone, under each way OpenMP's idle threads can wait: fedlab's
default (no variable set: each process spins or sleeps by how busy the machine is when it starts,
`fedlab/idle_threads.py`), how long libgomp lets a thread spin before it sleeps (`GOMP_SPINCOUNT`, about 100,000
spins a millisecond; 0 is OMP_WAIT_POLICY=PASSIVE, 300,000 libgomp's own default) and OMP_WAIT_POLICY=ACTIVE (spin
without end). A thread that sleeps at once pays a wake-up at every parallel region, which slows a run alone;
threads that spin for cores another run holds stall both runs. Two at once are started together, and staggered
(the second 3 s after the first, as a second experiment started by hand). The targets, for fedlab's default: one
alone within 1.1× the fastest policy's, and two at once, both ways, at most about twice one alone (no stall).

    python benchmarks/two_runs.py [--spins 0,300000] [--out benchmarks/results/two_runs.md]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import Report, last_line, table  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RUN = ["experiments/defaults.yaml", "model.name=pico-llama", "federation.rounds=3", "data.train_per_task=48",
       "data.test_per_task=16", "federation.batch_size=8", "model.max_length=64", "data.num_clients=4",
       "data.tasks=[recall,sentiment]", "tracking.enabled=false", "backend.threads=2"]


def clean_env(policy: dict) -> dict:
    """This process's environment without any wait variable (nor fedlab's mark of one), plus `policy`'s."""
    from fedlab import idle_threads

    return {**idle_threads.without_policy(os.environ), **policy, "FEDLAB_HOME": os.environ.get("FEDLAB_HOME", "")}


def one(policy: dict, tag: str, folder: Path, seed: int) -> subprocess.Popen:
    """A run started in the background; its stderr goes to <folder>/<tag>.err."""
    err = open(folder / f"{tag}.err", "w")
    p = subprocess.Popen([sys.executable, "-m", "fedlab.cli", "run", *RUN, f"output_dir={folder}/{tag}", f"seed={seed}"],
                         cwd=ROOT, env=clean_env(policy), stdout=subprocess.DEVNULL, stderr=err)
    p.err = err.name
    return p


def timed(start, n: int, stagger: float = 0.0) -> float:
    """Seconds from the first of `n` runs' start (`start(i)`) until all are done, each `stagger` s after the last."""
    t0 = time.perf_counter()
    procs = []
    for i in range(n):
        if i and stagger:
            time.sleep(stagger)
        procs.append(start(i))
    for p in procs:
        if p.wait() != 0:
            for q in procs:
                q.kill()
            raise SystemExit(f"two_runs.py: a run failed (exit {p.returncode}): {last_line(Path(p.err).read_text())}")
    return time.perf_counter() - t0


def policies(spins: str) -> dict[str, dict]:
    """{label: the environment it sets}: fedlab's default, each spin count, then spinning without end."""
    out = {f"GOMP_SPINCOUNT={n}" + (" (PASSIVE)" if n == "0" else " (libgomp's default)" if n == "300000" else ""):
           {"GOMP_SPINCOUNT": n} for n in spins.split(",") if n}
    return {"fedlab's default (none set)": {}, **out, "OMP_WAIT_POLICY=ACTIVE": {"OMP_WAIT_POLICY": "ACTIVE"}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--spins", default="0,300000", help="GOMP_SPINCOUNT values, comma-separated")
    ap.add_argument("--stagger", type=float, default=3.0, help="seconds between the staggered runs' starts")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    report = Report("benchmarks/two_runs.py")
    got = {}
    with tempfile.TemporaryDirectory() as d:
        for label, policy in policies(args.spins).items():
            run = lambda tag, p=policy: lambda i: one(p, f"{tag}{i}", Path(d), seed=i)  # noqa: E731
            got[label] = [min(timed(run(f"{tag}{r}-"), n, stagger) for r in range(args.repeats))
                          for tag, n, stagger in (("a", 1, 0.0), ("b", 2, 0.0), ("s", 2, args.stagger))]
    fastest = min(alone for alone, _, _ in got.values())
    rows = [[label, f"{alone:.1f}", f"{alone / fastest:.2f}", f"{both:.1f}", f"{both / alone:.2f}", f"{late:.1f}",
             f"{late / alone:.2f}"] for label, (alone, both, late) in got.items()]
    report.emit("## Two runs at once against one alone (pico model, 2 torch threads each, best of "
                f"{args.repeats}; staggered: the second started {args.stagger:g} s after the first)\n")
    report.emit(table(rows, ["idle OpenMP threads", "one alone (s)", "× the fastest alone (≤ 1.1)",
                             "two together (s, both done)", "× one alone (≤ about 2)", "two staggered (s)",
                             "× one alone (≤ about 2)"]))
    if args.out:
        report.write(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
