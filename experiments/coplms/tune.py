"""Co-PLMs' α and β chosen on a validation split: 10 % of each task's training data held out.

    python experiments/coplms/tune.py                 # the grid on validation, seeds 0,1,2 (resumable)
    python experiments/coplms/tune.py --render-only   # tune/RESULTS.md from tune/results.json

α weighs the devices' knowledge in the DPM's loss (L_dpm = α·L_kt + (1 − α)·CE), β the DPM's knowledge in each
SLM's (L_slm = β·L_kt + (1 − β)·CE). Each (α, β) of the grid runs the heterogeneous setting (tiny-gpt2, tiny-opt,
tiny-bloom; LLM tiny-llama; λ = 1) with `data.evaluate_on=validation`: 12 of each task's 120 training rows are held
out (seeded) and score the runs, the test sets are not read. The choice is the pair with the best mean device
Rouge-L over seeds, once every pair has `SEEDS` seeds; `make_tables.py` then runs Co-PLMs' rows at it (and says so)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from fedlab.config import load_config
from fedlab.evidence.page import GENERATED, kinds_line, stale_line, stale_seeds
from fedlab.evidence.runner import Planned, Results, run_table

HERE = Path(__file__).resolve().parent
OUT = HERE / "tune"
GRID = ("0.25", "0.5", "0.75")
METRIC = "rougeL/mean"            # the devices' mean Rouge-L on generated answers (every task)
VAL = ("data.evaluate_on=validation", "data.validation_per_task=12", "data.alpha=1.0")
SEEDS = 3                         # every pair's seeds before a choice is made


def _key(alpha: str, beta: str) -> str:
    return f"val/alpha{alpha}/beta{beta}"


def chosen(r: Results | None = None) -> tuple[str, str] | None:
    """(α, β) with the best mean validation Rouge-L over seeds, once every pair of the grid has `SEEDS` seeds."""
    path = OUT / "results.json"
    if r is None and not path.is_file():
        return None
    r = r or Results(path)
    means = {}
    for a in GRID:
        for b in GRID:
            v = r.values(_key(a, b), lambda rec: rec["final"].get(METRIC))
            if len(v) < SEEDS:
                return None
            means[(a, b)] = sum(v) / len(v)
    return max(means, key=means.get)


def plan() -> list[Planned]:
    return [Planned(_key(a, b), HERE / "hetero.yaml", (*VAL, f"method.alpha={a}", f"method.beta={b}"),
                    label=f"α = {a}, β = {b}", setting="validation") for a in GRID for b in GRID]


def render(r: Results) -> str:
    score = lambda rec: None if rec["final"].get(METRIC) is None else 100 * rec["final"][METRIC]  # noqa: E731
    seeds = sorted({rec["seed"] for rec in r.records.values()})
    cfg = plan()[0].resolve(0)
    L = [GENERATED, "# Co-PLMs: α and β on a validation split", "",
         f"Produced by `python experiments/coplms/tune.py` (seeds {', '.join(map(str, seeds)) or 'none yet'}; 2 CPU "
         f"cores). Heterogeneous devices ({', '.join(cfg.model.clients)}), LLM {cfg.model.name}, λ = "
         f"{cfg.data.alpha:g}; scored on {cfg.data.validation_per_task} held-out training rows per task (the test "
         "sets not read): the devices' mean Rouge-L ×100 on generated answers, mean over seeds ± 95 % interval.", ""]
    L += [kinds_line(r, {p.key for p in plan()}), ""] if r.records else []
    stale = stale_line(stale_seeds(r, plan(), r.stale(plan())), "experiments/coplms/tune.py", claims=False)
    if stale:
        L += [stale + " The choice below rests on them until they are re-run.", ""]
    L += ["| α \\ β | " + " | ".join(GRID) + " |", "|---" * (len(GRID) + 1) + "|"]
    for a in GRID:
        L.append(f"| {a} | " + " | ".join(r.cell(_key(a, b), score, 1) for b in GRID) + " |")
    best = chosen(r)
    yaml = load_config(str(HERE / "hetero.yaml"))
    L += ["", f"Chosen: α = {best[0]}, β = {best[1]} (the Co-PLMs rows of `make_tables.py` run at it)." if best
          else f"The grid is not complete yet ({SEEDS} seeds per pair): `make_tables.py` runs hetero.yaml's α = "
               f"{yaml.method.alpha:g}, β = {yaml.method.beta:g}."]
    return "\n".join(L) + "\n"


def main(argv: list[str]) -> int:
    OUT.mkdir(exist_ok=True)
    code = run_table(OUT, plan, render, title="Co-PLMs alpha and beta", argv=argv)
    if code == 0 and chosen() is not None:
        print(json.dumps({"alpha": chosen()[0], "beta": chosen()[1]}))
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
