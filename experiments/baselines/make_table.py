"""Run the baselines in both settings and print/write the results table (markdown).

    python experiments/baselines/make_table.py                 # embedded tiny LLM, both settings
    python experiments/baselines/make_table.py --smollm2       # adds FedAvg/zero-shot hetero on SmolLM2

Every number in the written RESULTS.md comes from the runs this script makes (also logged to MLflow)."""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
METHODS = ["zeroshot", "standalone", "fedavg", "fedprox", "centralized"]
TASKS = ["recall", "two_hop", "arithmetic", "category", "sentiment", "paraphrase", "entailment", "topic"]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--smollm2", action="store_true")
    ap.add_argument("overrides", nargs="*", help="key=value applied to every run")
    args = ap.parse_args()
    from fedlab.config import load_config
    from fedlab.experiment import run_experiment

    results: dict = {}
    runs = [(m, s, f"{m}_{s}.yaml", []) for s in ("homo", "hetero") for m in METHODS]
    if args.smollm2:
        runs += [("zeroshot", "hetero-smollm2", "fedavg_hetero_smollm2.yaml", ["method.name=zeroshot"]),
                 ("fedavg", "hetero-smollm2", "fedavg_hetero_smollm2.yaml", [])]
    for method, setting, file, extra in runs:
        t0 = time.time()
        cfg = load_config(HERE / file, [*extra, *args.overrides])
        h = run_experiment(cfg, progress=False)
        results[(method, setting)] = (h.final, time.time() - t0, h.run_id)
        print(f"{method:12s} {setting:15s} acc {h.final.get('acc/mean', float('nan')):.4f} "
              f"({time.time() - t0:.0f}s, run {h.run_id})", file=sys.stderr, flush=True)

    lines = ["| method | " + " | ".join(f"{s} mean acc" for s in ("homo", "hetero")) + " |", "|---|---|---|"]
    for m in METHODS:
        cells = [results.get((m, s), ({}, 0, None))[0].get("acc/mean") for s in ("homo", "hetero")]
        lines.append(f"| {m} | " + " | ".join("-" if c is None else f"{c:.3f}" for c in cells) + " |")
    lines += ["", "Heterogeneous setting, accuracy per task (8 clients, one task each):", "",
              "| method | " + " | ".join(TASKS) + " | mean |", "|---" * (len(TASKS) + 2) + "|"]
    for m in METHODS:
        f = results[(m, "hetero")][0]
        lines.append(f"| {m} | " + " | ".join(f"{f.get(f'acc/task_{t}', float('nan')):.2f}" for t in TASKS)
                     + f" | {f['acc/mean']:.3f} |")
    if args.smollm2:
        lines += ["", "SmolLM2-135M-Instruct, heterogeneous setting (small CPU budget, see the YAML):", "",
                  "| method | " + " | ".join(TASKS) + " | mean | wall s |", "|---" * (len(TASKS) + 3) + "|"]
        for m in ("zeroshot", "fedavg"):
            f, secs, _ = results[(m, "hetero-smollm2")]
            lines.append(f"| {m} | " + " | ".join(f"{f.get(f'acc/task_{t}', float('nan')):.2f}" for t in TASKS)
                         + f" | {f['acc/mean']:.3f} | {secs:.0f} |")
    table = "\n".join(lines)
    print(table)
    (HERE / "RESULTS.md").write_text(
        "# Baseline results\n\nProduced by `python experiments/baselines/make_table.py"
        + (" --smollm2" if args.smollm2 else "") + (" " + " ".join(args.overrides) if args.overrides else "")
        + "` (seed 0, 2 CPU cores).\n\n" + table + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
