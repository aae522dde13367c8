"""Two fedlab runs at once on one machine against one alone: the wall time of each, with OpenMP's threads waiting
passively (fedlab's default, OMP_WAIT_POLICY=PASSIVE) and spinning (ACTIVE). Runs that spin for cores the other
run holds stall each other; the target is two runs at once each taking at most about twice one alone's time on
a machine whose cores they share (no stall), with the passive policy.

    python benchmarks/two_runs.py [--out benchmarks/results/two_runs.md]
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
from _common import Report, table  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RUN = ["experiments/defaults.yaml", "model.name=pico-llama", "federation.rounds=3", "data.train_per_task=48",
       "data.test_per_task=16", "federation.batch_size=8", "model.max_length=64", "data.num_clients=4",
       "data.tasks=[recall,sentiment]", "tracking.enabled=false", "backend.threads=2"]


def one(policy: str, tag: str, folder: Path) -> subprocess.Popen:
    env = {**os.environ, "OMP_WAIT_POLICY": policy, "FEDLAB_HOME": os.environ.get("FEDLAB_HOME", "")}
    return subprocess.Popen([sys.executable, "-m", "fedlab.cli", "run", *RUN, f"output_dir={folder}/{tag}",
                             f"seed={len(tag)}"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def timed(procs: list[subprocess.Popen]) -> float:
    t0 = time.perf_counter()
    for p in procs:
        if p.wait() != 0:
            raise RuntimeError("a run failed")
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    report = Report("benchmarks/two_runs.py")
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for policy in ("PASSIVE", "ACTIVE"):
            alone = min(timed([one(policy, f"a{i}", Path(d))]) for i in range(args.repeats))
            both = min(timed([one(policy, f"b{i}", Path(d)), one(policy, f"bb{i}", Path(d))])
                       for i in range(args.repeats))
            rows.append([policy, f"{alone:.1f}", f"{both:.1f}", f"{both / alone:.2f}"])
    report.emit("## Two runs at once against one alone (pico model, 2 torch threads each, best of "
                f"{args.repeats})\n")
    report.emit(table(rows, ["OMP_WAIT_POLICY", "one alone (s)", "two at once (s, both done)",
                             "× one alone (≤ about 2: no stall)"]))
    if args.out:
        report.write(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
