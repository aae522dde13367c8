"""ELSA's tables at embedded scale (paper 002): Table 1 (accuracy of ELSA and the baselines that run in its
split + sketch pipeline, α̂ ∈ {0.1, 0.2}, four tasks), Table 2 (the clients' link time until each method
first reaches a target accuracy — the lowest plateau among the compared methods) and Table 3 (ELSA
at ρ ∈ {2.1, 3.3, 6.4, 8.4, 11.8}), the mislabelled clients the trust step finds, and the figures: fig5.png
(ELSA against the uncompressed Vanilla, with the link bytes each needs), fig6.png (left: ELSA against Simple
SL; right: the client-side depth p of the split, the paper's p ∈ {1, 3, 6, 9} of 12 blocks as p ∈ {1, 2, 3, 4}
of tiny-bert's 6 with the head block o = 1), table3.png (Table 3's measured cosines beside the dense-vector
arithmetic, and accuracy against ρ), t1long.png and t1long_entailment.png (Table 1's topic and entailment
α̂ = 0.1 cells at 320 rounds: ELSA against FedAvg, FedAvg (Random), Simple SL and FedCAda), Fig. 6 right at 80 and 320 rounds (`f6/`, `f6long/`); each cell the mean over
seeds ± its 95 % interval.

    python experiments/elsa/make_tables.py                      # every row, seeds 0–4 (resumable)
    python experiments/elsa/make_tables.py --only cal/          # the positive control first
    python experiments/elsa/make_tables.py --only t1/topic/     # one task
    python experiments/elsa/make_tables.py --only t1long/topic/  # Table 1's topic α̂ = 0.1 cell at 320 rounds
    python experiments/elsa/make_tables.py --only f6long/        # Fig. 6 right at 320 rounds (p = 3: t1long/)
    python experiments/elsa/make_tables.py --render-only        # RESULTS.md from results.json

Tasks are the embedded analogues of the paper's: topic (AG_News, 10 classes), sentiment (Emotion / SST-2),
entailment (RTE), paraphrase (MRPC). Table 4 (privacy) is `privacy_table.py`.

Before any comparison, the calibration rows (`cal/`) show that the split pipeline
learns every task at the table's budget when nothing is compressed and no client is left out — the reference:
FedAvg in the split pipeline (each client under its nearest edge, size weights) with ρ = 1 and no SS-OP — iid,
under the paper's skew, and centralized (one client holding all the data), with its learning curve
(calibration.png). Vanilla (ELSA uncompressed: its trust step and α_k included) is a Table 1 column: where it
falls below the reference, trust's exclusions are why (the trust section). Every accuracy is the split path as deployed; the whole
model's is beside it. Table 3 carries the sketch's controls: Y = 1 against Y = 3, hashes re-drawn per step, and
the uncompressed link with Gaussian noise of the sketch's MSE, each with the reconstruction cosine."""
from __future__ import annotations

import sys

from fedlab.evidence import System, page
from fedlab.evidence.runner import TABLE_SEEDS, Results, run_table

# the table's parts, re-exported here: `fedlab.evidence.summary.load_table("elsa")` gives every name in one module
from elsa_claims import *
from elsa_figures import *
from elsa_rows import *
from elsa_sections import *
from elsa_sections import _acc_cell
from elsa_trust import *

INTRO = ("Accuracies are the split path as deployed (client Part 1 → its link → θ₂ → the link back → Part 3 and "
         "head); the whole uncompressed model's is in brackets. Rows not run yet are absent. Every claim rests on the "
         "uncompressed reference of its task and skew learning it (chance + 25 points, in every seed; the head's "
         "chance: topic is 10-way), and those against Simple SL on Simple SL's own uncompressed control too.")


def rates() -> str:
    """The sentence naming the rate each task and Simple SL runs at (`TASK_RATES`,
    `SIMPLE_SL_RATE`) and whether its grid on validation data (`budget.py`) chose it yet, and the tasks the claims
    leave out as no rate tried teaches their reference in every seed (`tasks_left_out`)."""
    from fedlab.evidence.summary import load_table

    grids = load_table("elsa", script="budget")
    path = grids.OUT / "results.json"
    chosen = grids.chosen(Results(path)) if path.is_file() else {}
    held = {**TASK_RATES, "simple_sl": SIMPLE_SL_RATE}
    tried = {name: g.values for name, (_, g) in grids.grids().items()}
    said = lambda name: (f"lr {held[name]}, chosen on validation data (tried {', '.join(tried[name])})"
                         if name in chosen
                         else f"lr {held[name]}, the rate it ran at first (its grid has not chosen yet)")
    gone = "".join(f" **{t}** is scored and shown but left out of every claim: {why} (`budget/RESULTS.md`)."
                   for t, why in tasks_left_out().items())
    tasks = "; ".join(f"{t} at {said(t)}" for t in TASK_RATES)
    return f"The rates: {tasks}; Simple SL, on every task, at {said('simple_sl')} (`budget/RESULTS.md`).{gone}"


def render(r: Results) -> str:
    stale, outdated = r.stale_and_outdated(plan())   # † on the first; no verdict, no Table 2 target from the second
    return page(r, SYSTEM, f"{INTRO} {rates()}", body(r, stale, outdated), outdated=outdated, stale=stale)


def body(r: Results, stale: set[str], outdated: set[str]) -> list[str]:
    lines = []
    lines += calibration_section(r, stale, outdated)
    lines += table1(r, stale, outdated)
    lines += table1_long(r, stale, outdated)
    lines += table2(r, stale, outdated)
    dim = table_dim()
    lines += ["", "## Table 3: ELSA against the compression ratio ρ, with the sketch's controls (topic, α̂ = 0.1)", "",
              "ELSA's sketch: Y = 3 rows, hashes fixed per link. Controls at the same ρ: Y = 1; hashes re-drawn every "
              "(round, step); no sketch but Gaussian noise of the sketch's MSE on raw floats; Y = 1 with hashes re-drawn "
              "every (round, step) (is one row's gain its fixed, learnable map?). Cosine: the uplink "
              "activations' reconstruction cosine at evaluation. Dense-vector cosine: what the sketch of that shape "
              f"leaves a Gaussian vector of the model's D = {dim} (`fedlab/comm/sketch_theory.py`: 1/√(1 + (D − 1)/Z) "
              "for Y = 1, the median of Y = 3 rows by simulation); Y × Z is the sketch's shape (ρ achieved = D/(Y·Z); "
              "the nominal 6.4 and 11.8 round to 6.10 and 10.67). The noise control sends raw floats: its Y × Z is "
              "the sketch whose MSE its noise carries.",
              "", "| ρ | link | Y × Z (ρ achieved) | accuracy (×100) | cosine | dense-vector cosine | "
              "link bytes per round |", "|---|---|---|---|---|---|---|"]
    for ratio, suffix, label, key, rows in table3_rows():
        if r.runs(key):
            shape, theory = sketch_shape(float(ratio), rows, dim)
            shape = f"MSE of {shape}" if suffix == "/noise" else shape
            lines.append(f"| {ratio} | {label} | {shape} | {_acc_cell(r, key, stale)} | {r.cell(key, COS, 3)} | "
                         f"{theory:.3f} | {r.cell(key, lambda rec: rec['final'].get('server/link_bytes'), 0)} |")
    lines += table3_controls(r, outdated)
    lines += ["", "![Table 3: the sketch's cosine and the accuracy against ρ](table3.png)"]
    real = [k for k in ("real/minilm/elsa", "real/minilm/vanilla") if r.runs(k)]
    if real:
        lines += ["", "## A real encoder: all-MiniLM-L6-v2 (split 3/2/1, topic, α̂ = 0.1; `minilm.yaml`)", "",
                  "| method | accuracy (×100) | uplink cosine | link bytes per round | wall s |", "|---|---|---|---|---|"]
        for k in real:
            lines.append(f"| {r.label(k)} | {_acc_cell(r, k, stale)} | {r.cell(k, COS, 3)} | "
                         f"{r.cell(k, lambda rec: rec['final'].get('server/link_bytes'), 0)} | "
                         f"{r.cell(k, lambda rec: rec.get('seconds'), 0)} |")
    lines += fig6_right(r, stale, outdated)
    lines += mislabel_section(r)
    lines += trust_terms_section(r)
    figures(r, r.path.parent)
    lines += ["", "![Fig. 5 analogue](fig5.png)", "", "![Fig. 6 analogue](fig6.png)"]
    return lines


SYSTEM = System("ELSA", "split learning through edge servers: trust from fingerprints groups the clients, activations travel count-sketched and rotated", "experiments/elsa/make_tables.py", lambda: plan(), claims,
                run="fedlab run experiments/elsa/dirichlet.yaml")


if __name__ == "__main__":
    sys.exit(run_table(HERE, plan, render, title="ELSA tables", summarize=summarize,
                       default_seeds=TABLE_SEEDS))
