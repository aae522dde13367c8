"""Multiple-choice evaluation: each prompt once with its choices on the key/value cache (`eval.scorer=shared`,
the default) against one forward pass per (prompt, choice) (`pairs`, the reference), in the same run.

    python benchmarks/eval_speed.py                  # tiny-llama, every multiple-choice task, 300 questions each
    python benchmarks/eval_speed.py --main-job       # also the main job both ways: share of a round in evaluation

Prints per task the time of both scorers and whether their accuracies are identical; with --main-job the
round time, its evaluation share and the speed-up of the whole run.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import table  # noqa: E402


def bench_tasks(model_name: str, n: int, threads: int) -> list[list]:
    from fedlab.data.tasks import TASKS, task_examples
    from fedlab.eval.multiple_choice import _encode, mc_accuracy
    from fedlab.models.zoo import load_model

    torch.set_num_threads(threads)
    model, tok = load_model(model_name)
    tok.pad_token = tok.pad_token or tok.eos_token
    rows = []
    for task in [t for t, spec in TASKS.items() if spec.n_choices]:
        ex = task_examples(task, "test", n)
        _encode(tok, ex)          # the prompts' encodings, remembered for both scorers (a run encodes them once)
        t0 = time.perf_counter()
        pairs = mc_accuracy(model, tok, ex, max_length=96, shared=False)
        t1 = time.perf_counter()
        shared = mc_accuracy(model, tok, ex, max_length=96, shared=True)
        t2 = time.perf_counter()
        rows.append([task, str(n), t1 - t0, t2 - t1, (t1 - t0) / (t2 - t1), "yes" if pairs == shared else "NO"])
        print(f"{task:12s} pairs {t1 - t0:6.2f}s  shared {t2 - t1:6.2f}s  {(t1 - t0) / (t2 - t1):4.1f}×  "
              f"acc {pairs:.4f} / {shared:.4f}", file=sys.stderr, flush=True)
    return rows


def bench_main_job(rounds: int) -> list[list]:
    from fedlab.config import load_config
    from fedlab.experiment import run_experiment

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    rows = []
    for scorer in ("pairs", "shared"):
        cfg = load_config(os.path.join(root, "experiments/baselines/fedavg_hetero.yaml"),
                          [f"eval.scorer={scorer}", f"federation.rounds={rounds}", "tracking.enabled=false",
                           "eval.cache=false", "output_dir=/tmp/fedlab-eval-speed"])   # every score computed
        t0 = time.perf_counter()
        h = run_experiment(cfg, progress=False)
        total = time.perf_counter() - t0
        per_round = [r["time/round"] for r in h.rounds[1:]]
        evals = [r["time/round"] - r["time/fit_round"] for r in h.rounds[1:]]
        rows.append([scorer, total, sum(per_round) / len(per_round), sum(evals) / len(evals),
                     sum(evals) / sum(per_round), h.final["acc/mean"]])
        print(f"main job, scorer={scorer}: {total:.1f}s, evaluation {sum(evals) / sum(per_round):.0%} of a round",
              file=sys.stderr, flush=True)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="tiny-llama")
    ap.add_argument("--n", type=int, default=300, help="test questions per task")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--main-job", action="store_true")
    ap.add_argument("--rounds", type=int, default=8)
    args = ap.parse_args()
    rows = bench_tasks(args.model, args.n, args.threads)
    print(table(rows, ["task", "questions", "pairs s", "shared s", "speed-up", "same accuracy"]))
    total_p, total_s = sum(r[2] for r in rows), sum(r[3] for r in rows)
    print(f"\nall tasks: {total_p:.2f}s → {total_s:.2f}s = {total_p / total_s:.2f}× (target ≥ 2×); "
          f"identical accuracy on {sum(r[5] == 'yes' for r in rows)}/{len(rows)} tasks")
    if args.main_job:
        job = bench_main_job(args.rounds)
        print(table(job, ["scorer", "run s", "round s", "evaluation s / round", "evaluation share", "final acc"]))
        print(f"\nmain job: {job[0][1]:.1f}s → {job[1][1]:.1f}s; evaluation {job[0][4]:.0%} → {job[1][4]:.0%} of a "
              f"round; same final accuracy: {'yes' if job[0][5] == job[1][5] else 'NO'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
