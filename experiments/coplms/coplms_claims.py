"""Co-PLMs' positive controls (each model on the pooled data learns each task) and the paper's claims resting on them."""
from __future__ import annotations

import functools
from pathlib import Path

from fedlab.evidence import (
    Claim,
    above_chance,
    budget,
    metric_shares,
)

from coplms_rows import ABLATION, CONTROL_TASKS, FAMILIES, HETERO, HOMO, LAMBDAS, REAL_LLM, hetero_config

HERE = Path(__file__).resolve().parent

# The positive control: each model centrally LoRA-tuned on the pooled data ends MARGIN points above chance in
# exact match on every task, in every seed (one constant answer scores about chance).
MARGIN = 10.0


def learns(model: str, key: str | None = None, tasks: tuple[str, ...] = CONTROL_TASKS, at: str | None = None):
    """The control that `model`, LoRA-tuned centrally (row `key`; Table 1's by default), ends MARGIN points above
    chance on each of `tasks`; `at` names the table whose budget it runs at when that is not Table 1's (the same
    model's controls then keep apart on the page)."""
    from fedlab.data.tasks import TASKS

    told = ([at] if at else []) + ([", ".join(tasks)] if tuple(tasks) != CONTROL_TASKS else [])
    name = f"centralized {model}" + (f" ({'; '.join(told)})" if told else "")
    return above_chance(name, [key or f"control/{model}/centralized"], tasks,
                        lambda rec, t: rec["final"].get(f"em/task_{t}"), lambda t: TASKS[t].chance, MARGIN)


def hetero_devices() -> tuple[str, ...]:
    """The heterogeneous setting's device families, client i's at i (hetero.yaml's `model.clients`)."""
    return tuple(hetero_config().model.clients)


@functools.cache
def kept() -> dict[str, tuple[str, ...]]:
    """{device family: the tasks its centralized control learns in every seed on validation at the table's rate}
    (`budget.py`, `fedlab.evidence.budget.learnt`). The device claims read only these (family, task) cells: a
    family's score on a task its own reference does not reliably learn measures the family, not the method.
    Every task until the budget has chosen."""
    got = budget.learnt_in(HERE)
    return {f: got.get(f"centralized {f}", CONTROL_TASKS) for f in (*FAMILIES, *hetero_devices())}


# the real-model table (hetero_smollm2.yaml), whose devices' controls run at its own budget
REAL_TABLE = "SmolLM2 table"


@functools.cache
def real_kept() -> dict[str, tuple[str, ...]]:
    """{device family: the tasks its centralized control at the SmolLM2 table's budget learns in every seed on
    validation data at the devices' rate chosen there} (`budget.py`'s `real_devices`). The SmolLM2 table's device
    claims read only these cells. Every task until that grid has chosen."""
    got = budget.learnt_in(HERE, chain="real_devices")
    return {f: got.get(learns(f, at=REAL_TABLE).name, CONTROL_TASKS) for f in hetero_devices()}


def _cells(real: bool) -> dict[str, tuple[str, ...]]:
    return real_kept() if real else kept()


def left_out_cells(families=None, real: bool = False) -> dict[str, tuple[str, ...]]:
    """{family: the tasks its devices' claims leave out} (the complement of `kept`, or of `real_kept` for the
    SmolLM2 table's; default: the heterogeneous setting's families)."""
    families = hetero_devices() if families is None else families
    cells = _cells(real)
    return {f: tuple(t for t in CONTROL_TASKS if t not in cells[f]) for f in dict.fromkeys(families)
            if len(cells[f]) < len(CONTROL_TASKS)}


def devices(slms=None, real: bool = False):
    """The centralized controls of the device families (default: the heterogeneous setting's), each on the tasks
    its claims read (`kept`); `real`: those at the SmolLM2 table's budget, on `real_kept`'s tasks."""
    slms = hetero_devices() if slms is None else slms
    cells = _cells(real)
    if real:
        return tuple(learns(m, f"real/control/{m}/centralized", cells[m], at=REAL_TABLE)
                     for m in dict.fromkeys(slms) if cells[m])
    return tuple(learns(m, tasks=cells[m]) for m in dict.fromkeys(slms) if cells[m])


def device_score(families=None, tasks=None, real: bool = False):
    """record → the devices' Rouge-L: the mean over clients (`rougeL/mean`) when every cell is kept, else the
    mean of the kept (client, task) cells (`kept`, or `real_kept` with `real`), `rougeL_client_<i>/<task>`
    (client i runs families[i]; default: the heterogeneous setting's), on `tasks` only when given (a claim judged
    on fewer, `Claim.over`)."""
    families = hetero_devices() if families is None else families
    cells = [(i, t) for i, f in enumerate(families) for t in _cells(real)[f] if tasks is None or t in tasks]
    if tasks is None and len(cells) == len(families) * len(CONTROL_TASKS):
        return DEVICE

    return _mean_of([f"rougeL_client_{i}/{t}" for i, t in cells])


def _mean_of(metrics: list[str]):
    """record → the mean of its final `metrics`; None when it lacks any (or there are none)."""
    def score(rec):
        vals = [rec["final"].get(m) for m in metrics]
        return None if not vals or any(v is None for v in vals) else sum(vals) / len(vals)
    return score


def server_score(tasks=None):
    """record → the server LLM's Rouge-L: its mean over tasks (`llm/rougeL/mean`), or over `tasks` only."""
    return SERVER if tasks is None else _mean_of([f"llm/rougeL/task_{t}" for t in tasks])


def device_claim(text, source, paper, a, b, families=None, real: bool = False):
    """Row a's devices above row b's on the (family, task) cells `kept`, resting on each family's control; on
    fewer tasks where a control fails some in some seed (`Claim.over`). `real`: rows of the SmolLM2 table, on
    `real_kept`'s cells, resting on the families' controls at that table's budget."""
    families = hetero_devices() if families is None else families
    tasks = tuple(t for t in CONTROL_TASKS if any(t in _cells(real)[f] for f in families))
    return Claim(text, source, paper, a, b, device_score(families, real=real), control=devices(families, real),
                 shares=DEVICE_SHARES, tasks=tasks, over=lambda ts: (device_score(families, ts, real), None))


def server_claim(text, source, paper, a, b, control):
    """Row a's server LLM above row b's, on every task its control learns in every seed (`Claim.over`)."""
    return Claim(text, source, paper, a, b, SERVER, control=control, shares=SERVER_SHARES, tasks=control.tasks,
                 over=lambda ts: (server_score(ts), None))


DEVICE = lambda rec: rec["final"].get("rougeL/mean")
SERVER = lambda rec: rec["final"].get("llm/rougeL/mean")
DEVICE_SHARES, SERVER_SHARES = metric_shares("acc/mean"), metric_shares("llm/acc/mean")
# the paper's Table 1 and 2 numbers: Rouge-L, the mean over SNI and MMLU (devices: over its three devices)
PAPER = {"1": {"standalone": "49.3 vs 41.6 (+7.7)", "fedcollm": "49.3 vs 44.1 (+5.2)", "fedmkt": "49.3 vs 45.1 (+4.2)",
               "server fedmkt": "59.3 vs 55.0 (+4.4)", "server fedcollm": "59.3 vs 53.0 (+6.4)",
               "coplms_no_dst": "no number at λ = 1 (λ = 0.1: +4.9)",
               "coplms_no_saml": "no number at λ = 1 (λ = 0.1: +3.3)",
               "server coplms_no_saml": "no number at λ = 1 (λ = 0.1: +4.7)",
               "homo standalone": "46.0 vs 41.6 (+4.4)", "homo fedlora": "46.0 vs 44.0 (+1.9)",
               "homo fedap": "46.0 vs 38.7 (+7.3)"},
         "0.1": {"standalone": "48.8 vs 44.6 (+4.2)", "fedcollm": "48.8 vs 43.4 (+5.5)", "fedmkt": "48.8 vs 46.0 (+2.9)",
                 "server fedmkt": "59.8 vs 55.2 (+4.6)", "server fedcollm": "59.8 vs 51.6 (+8.2)",
                 "coplms_no_dst": "48.8 vs 43.9 (+4.9)", "coplms_no_saml": "48.8 vs 45.6 (+3.3)",
                 "server coplms_no_saml": "59.8 vs 55.2 (+4.7)", "homo standalone": "46.5 vs 44.6 (+1.9)",
                 "homo fedlora": "46.5 vs 43.3 (+3.2)", "homo fedap": "46.5 vs 33.7 (+12.8)"}}


def claims(_r=None) -> list[Claim]:
    """The paper's Table 1 and 2 claims, each resting on the centralized control of the models it scores."""
    out = []
    for lam, _ in LAMBDAS:
        co = f"hetero/lambda{lam}/coplms"
        src = "Table 1" if lam == "1" else "Table 1 (λ = 0.1)"
        for m, label in HETERO[:-1]:
            out.append(device_claim(f"λ={lam}: Co-PLMs above {label} (heterogeneous devices)", src, PAPER[lam][m], co,
                                    f"hetero/lambda{lam}/{m}"))
        for m, label in (("fedmkt", "FedMKT"), ("fedcollm", "FedCoLLM")):
            out.append(server_claim(f"λ={lam}: Co-PLMs above {label}, server LLM", src, PAPER[lam][f"server {m}"], co,
                                    f"hetero/lambda{lam}/{m}", learns("tiny-llama")))
        for m, label in ABLATION[1:3]:
            out.append(device_claim(f"λ={lam}: Co-PLMs above {label}", "Table 2", PAPER[lam][m], co,
                                    f"ablation/lambda{lam}/{m}"))
        out.append(server_claim(f"λ={lam}: Co-PLMs above w/o SAML, server LLM", "Table 2",
                                PAPER[lam]["server coplms_no_saml"], co, f"ablation/lambda{lam}/coplms_no_saml",
                                learns("tiny-llama")))
        for slm in FAMILIES:
            for m, label in HOMO[:-1]:
                out.append(device_claim(f"λ={lam}, {slm}: Co-PLMs above {label} (homogeneous devices)", src,
                                        PAPER[lam][f"homo {m}"], f"homo/{slm}/lambda{lam}/coplms",
                                        f"homo/{slm}/lambda{lam}/{m}", (slm,) * 3))
    real_llm = learns(REAL_LLM, f"real/control/{REAL_LLM}/centralized")
    out += [device_claim("SmolLM2: Co-PLMs above Standalone (heterogeneous devices)", "Table 1", PAPER["1"]["standalone"],
                         "real/hetero/coplms", "real/hetero/standalone", real=True),
            device_claim("SmolLM2: Co-PLMs above FedCoLLM (heterogeneous devices)", "Table 1", PAPER["1"]["fedcollm"],
                         "real/hetero/coplms", "real/hetero/fedcollm", real=True),
            server_claim("SmolLM2: Co-PLMs above FedCoLLM, server LLM", "Table 1", PAPER["1"]["server fedcollm"],
                         "real/hetero/coplms", "real/hetero/fedcollm", real_llm)]
    return out
