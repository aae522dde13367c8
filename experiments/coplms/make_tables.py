"""Co-PLMs' tables at embedded scale (paper 004): Table 1 (heterogeneous and homogeneous devices, Dirichlet
λ ∈ {1, 0.1}) and Table 2 (ablations), each cell the mean over seeds ± its 95 % interval.

    python experiments/coplms/make_tables.py                     # every row, seeds 0–4 (resumable)
    python experiments/coplms/make_tables.py --only hetero/      # the heterogeneous rows first
    python experiments/coplms/make_tables.py --render-only       # RESULTS.md from results.json

Scores are Rouge-L and exact match (×100) on generated answers of every task (the multiple-choice ones against
the right choice's text, `eval.mc_generate` in base.yaml), per device (its SLM on its domain-matched test items)
and for the server's LLM (on the shared test sets); the multiple-choice accuracy of the same models is in
results.json. Rows run in plan order: heterogeneous, ablations, homogeneous families, the positive control, the
real-LLM rows."""
from __future__ import annotations

import sys

from fedlab.evidence import (
    TABLE_SEEDS,
    Results,
    System,
    page,
    run_table,
)

# the table's parts, re-exported here: `fedlab.evidence.summary.load_table("coplms")` gives every name in one module
from coplms_claims import *
from coplms_rows import *
from coplms_sections import *
from coplms_sections import (
    _curve,  # noqa: F401  (read by the tests through load_table)
    _device_cells,
)


def intro() -> str:
    """The page's opening paragraph (the test items a device is scored on: base.yaml's
    `data.client_test_per_task`)."""
    return ("Table cells are Rouge-L / EM ×100 on generated answers; each device is scored on "
            f"{hetero_config().data.client_test_per_task} items per task drawn "
            "from the shared test sets with its own domain mix, the LLM on the shared test sets. The paper's numbers are "
            "Rouge-L means over SNI and MMLU (its devices Bloom-1.1B, Llama2-1.3B, Qwen2.5-1.5B; server GPT-J-6B); its "
            "homogeneous rows are averaged over its three SLM families, which fedlab's tiny families do not match one "
            "to one. Collapse is read from the same models' multiple-choice answers (`top/…`), the generated answers "
            "having no logged share." + rates_said())


def rates_said() -> str:
    """The sentence naming the rate each table trains at and the grid it was chosen from on validation data
    (`budget.py`); "" before its grids have chosen."""
    from fedlab.evidence.budget import choices_said

    embedded = choices_said(HERE)
    devices, server = (choices_said(HERE, chain=f"real_{who}") for who in ("devices", "server"))
    said = [f"the embedded tables train at {embedded}" if embedded else "",
            f"the SmolLM2 table's devices at {devices}" if devices else "",
            f"SmolLM2 (and the server step of FedCoLLM and Co-PLMs) at {server}" if server else ""]
    said = [s for s in said if s]
    return (" Learning rates: " + "; ".join(said) + ", each chosen on validation data by its table's references, "
            "the models tuned centrally on the pooled data ([budget/RESULTS.md](budget/RESULTS.md)).") if said else ""


def cells_read() -> list[str]:
    """The (device family, task) cells the device claims leave out, and why (`coplms_claims.kept`; the SmolLM2
    table's, `coplms_claims.real_kept`)."""
    out = [(f, tasks) for f, tasks in left_out_cells((*hetero_devices(), *FAMILIES)).items()]
    out += [(f"{f}, {REAL_TABLE}", tasks) for f, tasks in left_out_cells(real=True).items()]
    waits = "devices" not in real_rates()
    if not out and not waits:
        return []
    return ["## Device cells the claims read", "",
            "The device claims average Rouge-L over the (device family, task) cells whose family's centralized "
            "control learns the task in every seed on validation data at its table's rate "
            "([budget/RESULTS.md](budget/RESULTS.md); the SmolLM2 table's devices at that table's own budget); the "
            "control of each claim then checks those cells on the test sets. Table 1's *device mean* averages every "
            "cell; its last column, the devices' Rouge-L over the cells the claims read, is the score the device "
            "claims compare (a claim judged on fewer tasks names them in its row)."
            + (" The SmolLM2 table's devices' grid has not chosen yet: its device claims read every cell."
               if waits else "") + (" Left out:" if out else ""), "",
            *(f"- **{f}**: {', '.join(tasks)}" for f, tasks in out), *([""] if out else [])]


def render(r: Results) -> str:
    return page(r, SYSTEM, intro(), body(r))


def body(r: Results) -> list[str]:
    lines = cells_read()
    head = "| λ | method | Device-1 | Device-2 | Device-3 | Server LLM | device mean | device Rouge-L, the claims' cells |"
    lines += ["## Table 1, heterogeneous devices (tiny-gpt2, tiny-opt, tiny-bloom; LLM tiny-llama)", "", head,
              "|---" * 8 + "|"]
    for lam, _ in LAMBDAS:
        for m, label in HETERO:
            key = f"hetero/lambda{lam}/{m}"
            if r.runs(key):
                # Standalone's server LLM: the LLM tuned on the server's data alone — the w/o SAML run's LLM,
                # which never sees the devices
                solo = f"ablation/lambda{lam}/coplms_no_saml" if m == "standalone" and r.runs(
                    f"ablation/lambda{lam}/coplms_no_saml") else None
                lines.append(f"| {lam} | {label} | " + " | ".join(
                    _device_cells(r, key, llm=m != "standalone", llm_key=solo, claims_score=device_score())) + " |")
    lines += ["", "\\* Standalone's server LLM: LoRA-tuned on the server's data alone (CE, no device knowledge) — the "
              "LLM of the w/o SAML run at the same λ."]
    lines += ["", "## Table 1, homogeneous devices (three copies of one SLM)", "",
              "| SLM | λ | method | Device-1 | Device-2 | Device-3 | Server LLM | device mean "
              "| device Rouge-L, the claims' cells |", "|---" * 9 + "|"]
    for slm in FAMILIES:
        for lam, _ in LAMBDAS:
            for m, label in HOMO:
                key = f"homo/{slm}/lambda{lam}/{m}"
                if r.runs(key):
                    lines.append(f"| {slm} | {lam} | {label} | " + " | ".join(
                        _device_cells(r, key, llm=m == "coplms", claims_score=device_score((slm,) * 3))) + " |")
    real = [(m, label) for m, label in REAL if r.runs(f"real/hetero/{m}")]
    if real:
        lines += ["", "## Table 1 with a real LLM (SmolLM2-135M-Instruct, its 3-block DPM; tiny-gpt2, tiny-opt, "
                  "tiny-bloom; λ = 1; hetero_smollm2.yaml)", "", head, "|---" * 8 + "|"]
        lines += [f"| 1 | {label} | " + " | ".join(_device_cells(r, f"real/hetero/{m}", llm=m != "standalone",
                                                                claims_score=device_score(real=True))) + " |"
                  for m, label in real]
    lines += ["", "## Table 2, ablations (heterogeneous devices)", "", head, "|---" * 8 + "|"]
    for lam, _ in LAMBDAS:
        for m, label in ABLATION:
            key = f"hetero/lambda{lam}/{m}" if m == "coplms" else f"ablation/lambda{lam}/{m}"
            if r.runs(key):
                lines.append(f"| {lam} | {label} | " + " | ".join(_device_cells(r, key, claims_score=device_score()))
                             + " |")
    lines += (multiple_choice(r) + control_table(r) + communication(r) + sweep(r) + curves(r, r.path.parent)
              + differences(r))
    return lines


SYSTEM = System("Co-PLMs", "a distilled proxy of the LLM travels; on each device it and the device's own SLM learn from each other across tokenizers, with domain adapters", "experiments/coplms/make_tables.py", lambda: plan(),
                claims, run="fedlab run experiments/coplms/hetero.yaml")


if __name__ == "__main__":
    sys.exit(run_table(HERE, plan, render, title="coplms", default_seeds=TABLE_SEEDS))
