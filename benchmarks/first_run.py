"""The README's first result: `fedlab run experiments/baselines/fedavg_hetero.yaml` as written, in a fresh process
with an empty FEDLAB_HOME (the shipped zoo, nothing cached), its wall time and where the time went (the run's
own split: client fits, server, evaluation, bookkeeping), on the YAML's 2 torch threads and, for comparison, on
one (`backend.threads=1`: the same numbers bit for bit under the pinned numerics). The run's output goes to a
temporary folder. `--install` first times the README's install commands into a fresh virtual environment with
an empty pip cache (the registry's speed varies). The target: about four minutes from a fresh clone to the
first result.

    python benchmarks/first_run.py [--threads 2,1] [--install] [--out benchmarks/results/first_run.md]
"""
from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import Report, last_line, table  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SPLIT = re.compile(r"time: (.*)$", re.M)


def readme_lines(start: str) -> list[str]:
    """The README's command lines that begin with `start`, without their comments, in order."""
    text = (ROOT / "README.md").read_text()
    return [ln.split("#")[0].strip() for ln in text.splitlines() if ln.strip().startswith(start)]


def main_job() -> list[str]:
    """The README's command for the main job, as written there."""
    found = readme_lines("fedlab run experiments/")
    if not found:
        raise SystemExit("first_run.py: README.md has no `fedlab run experiments/...` line to time")
    return shlex.split(found[0])


def install_commands() -> list[str]:
    """The README's install commands (`pip install ...`), as written there."""
    found = readme_lines("pip install ")
    if not found:
        raise SystemExit("first_run.py: README.md has no `pip install` line to time")
    return found


def run(threads: int | None, python: str, folder: Path, extra: list[str]) -> tuple[float, str, str]:
    """(wall seconds, the run's time split line, its final mean accuracy line) of one main job."""
    cmd = [python, "-m", "fedlab.cli", *main_job()[1:], f"output_dir={folder}/runs",
           f"tracking.uri=sqlite:///{folder}/mlflow.db", f"tracking.artifact_root={folder}/artifacts", *extra]
    if threads is not None:
        cmd.append(f"backend.threads={threads}")
    from fedlab import idle_threads

    env = idle_threads.without_policy(os.environ)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, cwd=ROOT, env={**env, "FEDLAB_HOME": str(folder / "home")}, capture_output=True,
                       text=True)
    seconds = time.perf_counter() - t0
    if p.returncode:
        raise SystemExit(f"first_run.py: the main job failed (exit {p.returncode}): {last_line(p.stderr)}")
    split = SPLIT.findall(p.stdout + p.stderr)
    mean = re.findall(r"^\| mean.*$", p.stdout, flags=re.M)
    return seconds, split[-1] if split else "?", mean[-1] if mean else "?"


def install(folder: Path) -> tuple[float, str]:
    """(seconds, the venv's python) for the README's install commands into a fresh virtual environment."""
    venv = folder / "venv"
    env = {**os.environ, "PIP_NO_CACHE_DIR": "1"}
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    for c in install_commands():
        p = subprocess.run([str(venv / "bin" / "python"), "-m", *shlex.split(c)], cwd=ROOT, env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if p.returncode:
            raise SystemExit(f"first_run.py: `{c}` failed (exit {p.returncode}): {last_line(p.stderr)}")
    return time.perf_counter() - t0, str(venv / "bin" / "python")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", default="2,1", help="comma-separated torch thread counts (the YAML's: 2)")
    ap.add_argument("--install", action="store_true", help="time the README's install first")
    ap.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                    help="overrides after the README's command (a smaller job for a smoke test)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    report = Report("benchmarks/first_run.py")
    from fedlab.config import load_config

    own = load_config(str(ROOT / main_job()[2]), []).backend.threads
    rows = []
    with tempfile.TemporaryDirectory() as d:
        python = sys.executable
        if args.install:
            seconds, python = install(Path(d))
            report.emit(f"Install (`{'`, `'.join(install_commands())}` into a fresh virtual environment, empty pip cache): "
                        f"{seconds:.0f} s.\n")
        for t in (int(x) for x in args.threads.split(",")):
            folder = Path(d) / f"t{t}"
            seconds, split, mean = run(None if t == own else t, python, folder, args.set)
            rows.append([f"{t}" + (" (the YAML's)" if t == own else ""), f"{seconds:.0f}", split.removeprefix("time: "),
                         mean.strip("| ").replace("|", "·")])
    report.emit(f"## `{' '.join(main_job() + args.set)}`, empty FEDLAB_HOME\n")
    report.emit(table(rows, ["torch threads", "wall (s)", "the run's split", "mean accuracy (zero-shot · last round)"]))
    if args.out:
        report.write(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
