"""FedProxy's server step size η_g (Eq. 14) on the heterogeneous embedded setting: chosen on a
validation split, reported on the test sets beside the paper's η_g = 1, with the control that tests the
reading of H-TIES's over-stepping (FedAvg with η_g = √K) and the `denominator: all` ablation.

    python experiments/fedproxy/server_step.py                 # both stages, seeds 0,1,2 (resumable)
    python experiments/fedproxy/server_step.py --only val/     # the validation stage only
    python experiments/fedproxy/server_step.py --render-only   # server_step/RESULTS.md from its results.json

Stage 1 (`val/…`) runs with `data.evaluate_on=validation`: 40 of each task's 160 training prompts are held out
(seeded) and score the runs; the test sets are not read. Stage 2 (`test/…`) runs on the test sets: H-TIES at η_g = 1
(the paper), H-TIES at the η_g with the best mean validation accuracy over seeds (planned once stage 1 is
complete), FedAvg on the proxy at η_g = 1 and at √K (K = 8 clients), and H-TIES with `denominator: all`.
Accuracy is the LLM's after plug-in fusion (`llm/acc/mean`), mean over seeds ± its 95 % interval; the
differences are paired by seed."""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from fedlab.config import load_config
from fedlab.evidence.claims import differences_table
from fedlab.evidence.page import GENERATED, kinds_line, stale_line, stale_seeds
from fedlab.evidence.runner import Planned, Results, run_table

HERE = Path(__file__).resolve().parent
OUT = HERE / "server_step"
HETERO = load_config(str(HERE / "hetero.yaml"))
K = HETERO.data.num_clients
ETAS = ("0.25", "0.5", "1", "2")                # H-TIES on validation
SQRT_K = f"{math.sqrt(K):.3f}"
METRIC = "llm/acc/mean"
SEEDS = 3                                       # every validation row's seeds before η_g is chosen
VAL = ("data.evaluate_on=validation", "data.validation_per_task=40")
ARMS = {  # key: (label, YAML, overrides)
    "htiess": ("FedProxy (H-TIES)", HERE / "hetero.yaml", ()),
    "fedavg": ("FedAvg on the proxy", HERE / "hetero_fedavg_proxy.yaml", ()),
    "htiess_all": ("H-TIES, denominator: all", HERE / "hetero.yaml", ("method.denominator=all",)),
}


def chosen_eta(r: Results | None = None) -> str | None:
    """The H-TIES η_g with the best mean validation accuracy, once every validation row has `SEEDS` seeds."""
    r = r or Results(OUT / "results.json")
    means = {}
    for eta in ETAS:
        v = r.values(f"val/htiess/eta{eta}", lambda rec: rec["final"].get(METRIC))
        if len(v) < SEEDS:
            return None
        means[eta] = sum(v) / len(v)
    return max(means, key=means.get)


def plan() -> list[Planned]:
    rows = []
    for eta in ETAS:
        rows.append(Planned(f"val/htiess/eta{eta}", ARMS["htiess"][1], (*VAL, f"method.eta_g={eta}"),
                            label=f"H-TIES η_g = {eta}", setting="validation"))
    for eta in ("1", SQRT_K):
        rows.append(Planned(f"val/fedavg/eta{eta}", ARMS["fedavg"][1], (*VAL, f"method.eta_g={eta}"),
                            label=f"FedAvg η_g = {eta}", setting="validation"))
    test = [("htiess", "1"), ("fedavg", "1"), ("fedavg", SQRT_K), ("htiess_all", "1")]
    best = chosen_eta()
    if best is not None and best != "1":
        test.insert(1, ("htiess", best))
    for arm, eta in test:
        label, yaml, extra = ARMS[arm]
        rows.append(Planned(f"test/{arm}/eta{eta}", yaml, (*extra, f"method.eta_g={eta}"),
                            label=f"{label}, η_g = {eta}", setting="test"))
    return rows


def render(r: Results) -> str:
    acc = lambda rec: rec["final"].get(METRIC)
    seeds = sorted({rec["seed"] for rec in r.records.values()})
    L = [GENERATED, "# FedProxy: the server step size η_g (heterogeneous embedded setting)", "",
         f"Produced by `python experiments/fedproxy/server_step.py` (seeds {', '.join(map(str, seeds)) or 'none yet'}; "
         f"2 CPU cores; {HETERO.model.name}, {K} clients, one task each, κ = {HETERO.method.kappa:g}). "
         "The LLM's accuracy after plug-in fusion, "
         "mean over seeds ± 95 % interval; each run's command and resolved config in `server_step/results.json`.",
         ""]
    L += [kinds_line(r, {p.key for p in plan()}), ""] if r.records else []
    stale = stale_line(stale_seeds(r, plan(), r.stale(plan())), "experiments/fedproxy/server_step.py", claims=False)
    if stale:
        L += [stale + " The choice of η_g below rests on the `val/` rows among them until they are re-run.", ""]
    val = plan()[0].resolve(0).data.validation_per_task
    L += [f"## Stage 1: validation ({val} held-out training prompts per task; the test sets not read)", "",
          "| arm | η_g | validation accuracy |", "|---|---|---|"]
    for key in [f"val/htiess/eta{e}" for e in ETAS] + [f"val/fedavg/eta{e}" for e in ("1", SQRT_K)]:
        if r.runs(key):
            arm = "H-TIES" if "/htiess/" in key else "FedAvg (proxy)"
            L.append(f"| {arm} | {key.split('eta')[-1]} | {r.cell(key, acc, 3)} |")
    best = chosen_eta(r)
    L += ["", f"Chosen on validation: H-TIES η_g = {best}." if best else "Stage 1 is not complete yet.", "",
          "## Stage 2: test", "", "| row | test accuracy |", "|---|---|"]
    test_keys = [k for k in dict.fromkeys(rec["key"] for rec in r.records.values()) if k.startswith("test/")]
    for key in test_keys:
        L.append(f"| {r.label(key, key)} | {r.cell(key, acc, 3)} |")
    pairs = [("tuned H-TIES − paper's H-TIES (η_g = 1)", f"test/htiess/eta{best}", "test/htiess/eta1"),
             ("H-TIES − FedAvg, both η_g = 1", "test/htiess/eta1", "test/fedavg/eta1"),
             (f"FedAvg η_g = √K ({SQRT_K}) − FedAvg η_g = 1", f"test/fedavg/eta{SQRT_K}", "test/fedavg/eta1"),
             ("H-TIES (η_g = 1) − FedAvg η_g = √K", "test/htiess/eta1", f"test/fedavg/eta{SQRT_K}"),
             ("H-TIES denominator all − agreeing (η_g = 1)", "test/htiess_all/eta1", "test/htiess/eta1")]
    diffs = differences_table(r, [(name, a, METRIC, b, METRIC) for name, a, b in pairs
                                  if not (name.startswith("tuned") and best in (None, "1"))],
                              outdated=r.outdated(plan()))
    if diffs:
        L += ["", "## Differences, paired by seed", "", *diffs]
    return "\n".join(L) + "\n"


def main(argv: list[str]) -> int:
    OUT.mkdir(exist_ok=True)
    planned = {p.key for p in plan()}
    code = run_table(OUT, plan, render, title="FedProxy server step", argv=argv)
    if code == 0 and "--render-only" not in argv and {p.key for p in plan()} - planned:
        code = run_table(OUT, plan, render, title="FedProxy server step", argv=argv)   # stage 1 just completed
    if code == 0 and chosen_eta() is not None:
        print(json.dumps({"chosen_eta_g": chosen_eta()}))
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
