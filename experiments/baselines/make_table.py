"""The baselines table: zero-shot, standalone, FedAvg, FedProx and centralized training on the embedded
benchmark (tiny-llama; homogeneous and heterogeneous settings) and on SmolLM2-135M-Instruct (heterogeneous,
small CPU budget).

    python experiments/baselines/make_table.py                      # every row, seeds 0–4 (resumable)
    python experiments/baselines/make_table.py --only tiny/         # the tiny-llama rows only
    python experiments/baselines/make_table.py --render-only        # RESULTS.md from results.json

Each run's record (command, resolved method config, MLflow run id, metrics) is in results.json;
RESULTS.md is rendered from it alone (`fedlab.evidence.runner`)."""
from __future__ import annotations

import sys
from pathlib import Path

from fedlab.data.tasks import TASKS as TASK_SPECS
from fedlab.evidence.claims import differences_table
from fedlab.evidence.page import GENERATED
from fedlab.evidence.runner import TABLE_SEEDS, Planned, Results, constant_answer_note, run_table

HERE = Path(__file__).resolve().parent
METHODS = ["zeroshot", "standalone", "fedavg", "fedprox", "centralized"]
TASKS = ["recall", "two_hop", "arithmetic", "category", "sentiment", "paraphrase", "entailment", "topic"]
TRAINED = ["standalone", "fedavg", "fedprox", "centralized"]
# differences a reader asks about, paired over seeds (same seed = same data, sampling and initialisation)
PAIRS = [("centralized", "zeroshot"), ("centralized", "standalone"), ("centralized", "fedavg"),
         ("fedavg", "standalone"), ("fedprox", "fedavg")]


def plan() -> list[Planned]:
    rows = [Planned(f"tiny/{s}/{m}", HERE / f"{m}_{s}.yaml", label=m, setting=s)
            for s in ("homo", "hetero") for m in METHODS]
    rows += [Planned(f"smollm2/hetero/{m}", HERE / "fedavg_hetero_smollm2.yaml", (f"method.name={m}",), label=m,
                     setting="hetero-smollm2") for m in METHODS]
    return rows


def render(r: Results) -> str:
    seeds = sorted({rec["seed"] for rec in r.records.values()})
    lines = [GENERATED, "# Baseline results", "",
             f"Produced by `python experiments/baselines/make_table.py` (seeds {', '.join(map(str, seeds))} where "
             "a row has them; "
             "2 CPU cores, two runs side by side: the wall times are per run); every cell is the mean over seeds ± "
             "the half-width of its 95 % t-interval. "
             "`results.json` holds each run's command, resolved config, wall time and MLflow run id.", "",
             "| method | homo mean acc | hetero mean acc |", "|---|---|---|"]
    stale, outdated = r.stale_and_outdated(plan())   # † on the first; no verdict on the second
    for m in METHODS:
        cells = [r.final(f"tiny/{s}/{m}", "acc/mean") + (" †" if f"tiny/{s}/{m}" in stale else "")
                 for s in ("homo", "hetero")]
        lines.append(f"| {m} | {cells[0]} | {cells[1]} |")
    for prefix, title in (("tiny/hetero", "Heterogeneous setting, tiny-llama, accuracy per task (16 clients, two "
                                          "per task):"),
                          ("smollm2/hetero", "SmolLM2-135M-Instruct, heterogeneous setting (small CPU budget, see "
                                             "`fedavg_hetero_smollm2.yaml`):")):
        rows = [m for m in METHODS if r.runs(f"{prefix}/{m}")]
        if not rows:
            continue
        lines += ["", title, "", "| method | " + " | ".join(TASKS) + " | mean | wall s |", "|---" * (len(TASKS) + 3) + "|"]
        for m in rows:
            key = f"{prefix}/{m}"
            secs = r.values(key, lambda rec: rec["seconds"])
            mark = " †" if key in stale else ""
            lines.append(f"| {m}{mark} | " + " | ".join(r.final(key, f"acc/task_{t}", 2) for t in TASKS)
                         + f" | {r.final(key, 'acc/mean')} | {sum(secs) / len(secs):.0f} |")
        lines += constant_answer_note(r, [f"{prefix}/{m}" for m in rows])
        old = [m for m in rows if f"{prefix}/{m}" in stale]
        if old:
            seeds_old = sorted({x["seed"] for m in old for x in r.runs(f"{prefix}/{m}")})
            lines += ["", "† stale: made by another config, other weights or other CPU numerics than a run here would use "
                          f"(seeds {', '.join(map(str, seeds_old))}), kept until re-run with "
                          f"`python experiments/baselines/make_table.py --only {prefix.split('/')[0]}/`."]
    lines += headroom(r, "tiny/hetero") + differences(r, "tiny/hetero", "heterogeneous", outdated)
    lines += differences(r, "tiny/homo", "homogeneous", outdated)
    return "\n".join(lines) + "\n"


def _mean(r: Results, key: str, metric: str):
    vals = list(r.by_seed(key, metric).values())
    return sum(vals) / len(vals) if vals else None


def differences(r: Results, prefix: str, setting: str, outdated: set[str]) -> list[str]:
    """Paired differences of the mean accuracy over the seeds both rows have; no verdict on the rows in
    `outdated` (`Results.outdated(plan())`)."""
    rows = differences_table(r, [(f"{a} − {b}", f"{prefix}/{a}", "acc/mean", f"{prefix}/{b}", "acc/mean")
                                 for a, b in PAIRS], outdated=outdated)
    if not rows:
        return []
    return ["", f"Paired differences of the mean accuracy, {setting} setting (± the 95 % t-interval of the "
                "difference; significant: the interval excludes 0; MDE: the smallest true difference these seeds "
                "detect with 80 % power, paired t-test, two-sided α = 0.05):", "", *rows]


def headroom(r: Results, prefix: str) -> list[str]:
    """The calibration targets of the benchmark, checked on the heterogeneous tiny-llama rows."""
    zero, cent = _mean(r, f"{prefix}/zeroshot", "acc/mean"), _mean(r, f"{prefix}/centralized", "acc/mean")
    stand, avg = _mean(r, f"{prefix}/standalone", "acc/mean"), _mean(r, f"{prefix}/fedavg", "acc/mean")
    if None in (zero, cent, stand, avg):
        return []
    rows = [("centralized − zero-shot ≥ 0.10", f"{cent - zero:+.3f}", cent - zero >= 0.10),
            ("centralized > standalone (mean)", f"{cent:.3f} vs {stand:.3f}", cent > stand),
            ("FedAvg < centralized (the conflict shows)", f"{avg:.3f} vs {cent:.3f}", avg < cent)]
    below = []
    for t in TASKS:
        chance = TASK_SPECS[t].chance
        best = max((_mean(r, f"{prefix}/{m}", f"acc/task_{t}") or 0.0, m) for m in TRAINED)
        rows.append((f"{t}: best fine-tuned ≥ chance + 0.15 ({chance + 0.15:.2f})", f"{best[0]:.3f} ({best[1]})",
                     best[0] >= chance + 0.15))
        below += [f"{m} on {t} ({v:.3f} < {chance:.2f})" for m in METHODS
                  if (v := _mean(r, f"{prefix}/{m}", f"acc/task_{t}")) is not None and v < chance]
    out = ["", "Headroom of the benchmark (heterogeneous setting, tiny-llama, means over seeds):", "",
           "| target | measured | met |", "|---|---|---|"]
    out += [f"| {name} | {value} | {'yes' if ok else 'NO'} |" for name, value, ok in rows]
    out += ["", "Below chance: " + ("; ".join(below) if below else "no method on any task.")]
    return out


if __name__ == "__main__":
    sys.exit(run_table(HERE, plan, render, title="baselines", default_seeds=TABLE_SEEDS))
