"""Run the baselines and print/write the results table (markdown).

    python experiments/baselines/make_table.py                 # embedded tiny LLM, both settings (≈ 7 min)
    python experiments/baselines/make_table.py --smollm2       # plus all five on SmolLM2, heterogeneous (≈ 30 min)
    python experiments/baselines/make_table.py --only smollm2  # just the SmolLM2 rows

Results accumulate in results.json (with each run's command and MLflow run id); RESULTS.md is rendered
from it, so every number there comes from a run this script made."""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
METHODS = ["zeroshot", "standalone", "fedavg", "fedprox", "centralized"]
TASKS = ["recall", "two_hop", "arithmetic", "category", "sentiment", "paraphrase", "entailment", "topic"]
SETTINGS = {"homo": "tiny", "hetero": "tiny", "hetero-smollm2": "smollm2"}


def planned(only: str | None, smollm2: bool) -> list[tuple[str, str, Path, list[str]]]:
    out = []
    if only in (None, "tiny"):
        out += [(m, s, HERE / f"{m}_{s}.yaml", []) for s in ("homo", "hetero") for m in METHODS]
    if only == "smollm2" or (only is None and smollm2):
        out += [(m, "hetero-smollm2", HERE / "fedavg_hetero_smollm2.yaml", [f"method.name={m}"]) for m in METHODS]
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--smollm2", action="store_true")
    ap.add_argument("--only", choices=["tiny", "smollm2"])
    ap.add_argument("--render-only", action="store_true")
    args = ap.parse_args()
    from fedlab.config import load_config
    from fedlab.experiment import run_experiment

    store = HERE / "results.json"
    results = json.loads(store.read_text()) if store.exists() else {}
    for method, setting, yaml, extra in ([] if args.render_only else planned(args.only, args.smollm2)):
        t0 = time.time()
        h = run_experiment(load_config(yaml, extra), progress=False)
        f = {k: v for k, v in h.final.items() if k.startswith("acc/")}
        results[f"{method}/{setting}"] = {
            "final": f, "seconds": round(time.time() - t0, 1), "run_id": h.run_id,
            "command": f"fedlab run {yaml.relative_to(HERE.parents[1])} {' '.join(extra)}".strip()}
        store.write_text(json.dumps(results, indent=1))
        print(f"{method:12s} {setting:15s} acc {f.get('acc/mean', float('nan')):.4f} ({time.time() - t0:.0f}s, "
              f"run {h.run_id})", file=sys.stderr, flush=True)
    text = render(results)
    (HERE / "RESULTS.md").write_text(text)
    print(text)
    return 0


def render(results: dict) -> str:
    def get(m, s):
        return results.get(f"{m}/{s}", {}).get("final", {})

    lines = ["# Baseline results", "", "Produced by `python experiments/baselines/make_table.py --smollm2` (seed 0, "
             "2 CPU cores); `results.json` holds each run's command, wall time and MLflow run id.", "",
             "| method | homo mean acc | hetero mean acc |", "|---|---|---|"]
    for m in METHODS:
        cells = [get(m, s).get("acc/mean") for s in ("homo", "hetero")]
        lines.append(f"| {m} | " + " | ".join("-" if c is None else f"{c:.3f}" for c in cells) + " |")
    for setting, title in (("hetero", "Heterogeneous setting, tiny-llama, accuracy per task (8 clients, one task each):"),
                           ("hetero-smollm2", "SmolLM2-135M-Instruct, heterogeneous setting (small CPU budget, see "
                                              "`fedavg_hetero_smollm2.yaml`):")):
        rows = [m for m in METHODS if get(m, setting)]
        if not rows:
            continue
        lines += ["", title, "", "| method | " + " | ".join(TASKS) + " | mean | wall s |", "|---" * (len(TASKS) + 3) + "|"]
        for m in rows:
            f = get(m, setting)
            lines.append(f"| {m} | " + " | ".join(f"{f.get(f'acc/task_{t}', float('nan')):.2f}" for t in TASKS)
                         + f" | {f['acc/mean']:.3f} | {results[f'{m}/{setting}']['seconds']:.0f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
