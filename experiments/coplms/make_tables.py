"""Co-PLMs' tables at embedded scale (paper 004): Table 1 (heterogeneous and homogeneous devices, Dirichlet
λ ∈ {1, 0.1}) and Table 2 (ablations), each cell the mean over seeds ± its 95 % interval.

    python experiments/coplms/make_tables.py                     # every row, seeds 0,1,2 (resumable)
    python experiments/coplms/make_tables.py --only hetero/      # the heterogeneous rows first
    python experiments/coplms/make_tables.py --render-only       # RESULTS.md from results.json

Scores are Rouge-L and exact match (×100) on generated answers of every task (the multiple-choice ones against
the right choice's text, `eval.mc_generate` in base.yaml), per device (its SLM on its domain-matched test items)
and for the server's LLM (on the shared test sets); the multiple-choice accuracy of the same models is in
results.json. Rows run in plan order: heterogeneous, ablations, homogeneous families, the positive control, the
real-LLM rows."""
from __future__ import annotations

import sys
from pathlib import Path

from fedlab.evidence import (
    Claim,
    Planned,
    Results,
    System,
    above_chance,
    differences_table,
    metric_shares,
    page,
    run_table,
)

HERE = Path(__file__).resolve().parent
LAMBDAS = (("1", "1.0"), ("0.1", "0.1"))
HETERO = [("standalone", "Standalone"), ("fedcollm", "FedCoLLM"), ("fedmkt", "FedMKT"), ("coplms", "Co-PLMs")]
HOMO = [("standalone", "Standalone"), ("fedlora", "FedLoRA"), ("fedap", "FedAP"), ("coplms", "Co-PLMs")]
ABLATION = [("coplms", "Co-PLMs"), ("coplms_no_dst", "w/o DST"), ("coplms_no_saml", "w/o SAML"),
            ("coplms_kt_sum", "L_kt summed per answer (kt_reduction: sum)")]
# one axis at a time around the table's Co-PLMs row (K = 16, κ = 0.5; α, β as tune.py chose), λ = 1 (the
# README's sweep backed by committed records); α and β themselves are tune.py's grid
SWEEP = [("topk", "4", "K (top-K pooling)"), ("topk", "64", "K (top-K pooling)"),
         ("kappa", "0.67", "κ (fraction of the LLM's blocks the DPM drops)"),
         ("kappa", "0.84", "κ (fraction of the LLM's blocks the DPM drops)")]
SWEEP_DEFAULT = {"topk": "16", "kappa": "0.5"}
# per-round curves: the server DPM's and LLM's scores after every round, with server SAML and without
CURVES = [("coplms", "Co-PLMs"), ("coplms_no_saml", "w/o SAML")]
FAMILIES = ["tiny-gpt2", "tiny-opt", "tiny-bloom"]


def tuned_alpha_beta() -> tuple[str, str] | None:
    """(α, β) chosen on validation by `tune.py` (None until its grid is complete)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("coplms_tune", HERE / "tune.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.chosen()


def _method(name: str, slm: str | None = None) -> tuple[str, ...]:
    """Overrides that make `name` run in this setting: FedLoRA and FedAP train the devices' SLM itself
    (model.name is the SLM, no LLM); FedMKT distils on the server's share as its public set; Co-PLMs and its
    ablations at the α, β `tune.py` chose on validation, once it has."""
    if name == "fedlora":
        return ("method.name=fedavg", f"model.name={slm}", "model.clients=null")
    if name == "fedap":
        return ("method.name=fedap", f"model.name={slm}", "model.clients=null")
    if name == "coplms_kt_sum":      # the ablation: L_kt summed over an answer's paired positions
        return (*_method("coplms"), "method.kt_reduction=sum")
    tuned = tuned_alpha_beta() if name.startswith("coplms") else None
    return (f"method.name={name}",) + ((f"method.alpha={tuned[0]}", f"method.beta={tuned[1]}") if tuned else ())


def plan() -> list[Planned]:
    rows = []
    for lam, alpha in LAMBDAS:
        for m, label in HETERO:
            rows.append(Planned(f"hetero/lambda{lam}/{m}", HERE / "hetero.yaml", (*_method(m), f"data.alpha={alpha}"),
                                label=label, setting=f"hetero λ={lam}"))
    for lam, alpha in LAMBDAS:
        for m, label in ABLATION[1:]:
            rows.append(Planned(f"ablation/lambda{lam}/{m}", HERE / "hetero.yaml", (*_method(m), f"data.alpha={alpha}"),
                                label=label, setting=f"hetero λ={lam}"))
    for slm in FAMILIES:
        for lam, alpha in LAMBDAS:
            for m, label in HOMO:
                rows.append(Planned(f"homo/{slm}/lambda{lam}/{m}", HERE / "homo.yaml",
                                    (f"model.clients=[{slm},{slm},{slm}]", *_method(m, slm), f"data.alpha={alpha}"),
                                    label=label, setting=f"homo {slm} λ={lam}"))
    for model in CONTROL_MODELS:
        for m, label, extra in (("zeroshot", "zero-shot", ()), ("centralized", "centralized", ("method.include_public=true",))):
            rows.append(Planned(f"control/{model}/{m}", HERE / "hetero.yaml",
                                (f"method.name={m}", f"model.name={model}", "model.clients=null", *extra),
                                label=f"{model} {label}", setting="positive control"))
    for axis, value, _label in SWEEP:
        rows.append(Planned(f"sweep/{axis}{value}", HERE / "hetero.yaml", (*_method("coplms"), f"method.{axis}={value}"),
                            label=f"Co-PLMs, {axis} = {value}", setting="hetero λ=1 sweep"))
    for m, label in CURVES:
        rows.append(Planned(f"curves/lambda1/{m}", HERE / "hetero.yaml", (*_method(m), "eval.every=1"),
                            label=f"{label}, scored every round", setting="hetero λ=1 curves"))
    for m, label in REAL:
        rows.append(Planned(f"real/hetero/{m}", HERE / "hetero_smollm2.yaml", _method(m), label=label,
                            setting="real hetero λ=1"))
    # the real LLM's own control: SmolLM2 LoRA-tuned on the pooled data at that table's budget
    rows.append(Planned(f"real/control/{REAL_LLM}/centralized", HERE / "hetero_smollm2.yaml",
                        ("method.name=centralized", "model.clients=null", "method.include_public=true"),
                        label=f"{REAL_LLM} centralized", setting="real positive control"))
    return rows


# The positive control: each model of Table 1 — the server LLM and the three device SLM families —
# LoRA-tuned centrally on all of the heterogeneous setting's training data (the devices' and the server's), at the
# table's budget, against its zero-shot: every task must be learnt by the reference before methods are compared
CONTROL_MODELS = ("tiny-llama", "tiny-gpt2", "tiny-opt", "tiny-bloom")
CONTROL_TASKS = ("sentiment", "entailment", "paraphrase", "topic")     # base.yaml's tasks (a test checks)


def control_table(r: Results) -> list[str]:
    """Per model and task, zero-shot and centralized exact match ×100 (one-word answers: EM is the generated
    answer's accuracy) with the centralized runs' 95 % interval: the control rows in detail (the Controls table
    above judges them, seed by seed)."""
    from fedlab.data.tasks import TASKS

    models = [m for m in CONTROL_MODELS if r.runs(f"control/{m}/centralized")]
    if not models:
        return []
    em = lambda t: lambda rec: None if rec["final"].get(f"em/task_{t}") is None else 100 * rec["final"][f"em/task_{t}"]
    out = ["", "## The positive control's rows: centralized LoRA on all the training data (exact match ×100)", "",
           "Each model of Table 1 tuned on the pooled data of the heterogeneous setting (devices' and server's, λ = 1) "
           "at the table's budget, scored on the shared test sets by its generated answer: zero-shot → centralized.", "",
           "| model | " + " | ".join(f"{t} (chance {100 * TASKS[t].chance:.0f})" for t in CONTROL_TASKS) + " |",
           "|---" * (len(CONTROL_TASKS) + 1) + "|"]
    for m in models:
        cells = [f"{r.cell(f'control/{m}/zeroshot', em(t), 1)} → "
                 f"{r.cell(f'control/{m}/centralized', em(t), 1, shares=metric_shares(f'acc/task_{t}'))}"
                 for t in CONTROL_TASKS]
        out.append(f"| {m} | " + " | ".join(cells) + " |")
    return out


# A real LLM: SmolLM2-135M-Instruct in the cloud with its own 3-block DPM, the three tiny device SLMs
# of hetero.yaml, λ = 1, at a 2-core budget (hetero_smollm2.yaml); `--only real/`
REAL = [("standalone", "Standalone"), ("fedcollm", "FedCoLLM"), ("coplms", "Co-PLMs")]
REAL_LLM = "smollm2-135m"


def _pct(r: Results, key: str, metric: str, shares: str | None = None) -> str:
    """`metric` ×100 over the row's seeds; with `shares` (an accuracy metric of the same model) the collapse marker
    of that model's multiple-choice answers (the generated answers log no share)."""
    return r.cell(key, lambda rec: None if rec["final"].get(metric) is None else 100 * rec["final"][metric], 1,
                  shares=metric_shares(shares) if shares else None)


def _device_cells(r: Results, key: str, devices: int = 3, llm: bool = True, llm_key: str | None = None) -> list[str]:
    """Each device's Rouge-L / EM, the server LLM's (from `llm_key`'s runs when given), the device mean."""
    cells = []
    for c in range(devices):
        cells.append(f"{_pct(r, key, f'rougeL/client_{c}')} / {_pct(r, key, f'em/client_{c}', f'acc/client_{c}')}")
    lk = llm_key or key
    cells.append(f"{_pct(r, lk, 'llm/rougeL/mean')} / {_pct(r, lk, 'llm/em/mean', 'llm/acc/mean')}"
                 + ("*" if llm_key else "") if llm or llm_key else "n/a")
    cells.append(f"{_pct(r, key, 'rougeL/mean')} / {_pct(r, key, 'em/mean', 'acc/mean')}")
    return cells


def _seeds(r: Results) -> str:
    seeds = sorted({rec["seed"] for rec in r.records.values()})
    return ", ".join(map(str, seeds)) or "none yet"


INTRO = ("Table cells are Rouge-L / EM ×100 on generated answers; each device is scored on 30 items per task drawn "
         "from the shared test sets with its own domain mix, the LLM on the shared test sets. The paper's numbers are "
         "Rouge-L means over SNI and MMLU (its devices Bloom-1.1B, Llama2-1.3B, Qwen2.5-1.5B; server GPT-J-6B); its "
         "homogeneous rows are averaged over its three SLM families, which fedlab's tiny families do not match one "
         "to one. Collapse is read from the same models' multiple-choice answers (`top/…`), the generated answers "
         "having no logged share.")


def render(r: Results) -> str:
    return page(r, SYSTEM, INTRO, body(r))


def body(r: Results) -> list[str]:
    lines = []
    head = "| λ | method | Device-1 | Device-2 | Device-3 | Server LLM | device mean |"
    lines += ["## Table 1, heterogeneous devices (tiny-gpt2, tiny-opt, tiny-bloom; LLM tiny-llama)", "", head,
              "|---" * 7 + "|"]
    for lam, _ in LAMBDAS:
        for m, label in HETERO:
            key = f"hetero/lambda{lam}/{m}"
            if r.runs(key):
                # Standalone's server LLM: the LLM tuned on the server's data alone — the w/o SAML run's LLM,
                # which never sees the devices
                solo = f"ablation/lambda{lam}/coplms_no_saml" if m == "standalone" and r.runs(
                    f"ablation/lambda{lam}/coplms_no_saml") else None
                lines.append(f"| {lam} | {label} | " + " | ".join(
                    _device_cells(r, key, llm=m != "standalone", llm_key=solo)) + " |")
    lines += ["", "\\* Standalone's server LLM: LoRA-tuned on the server's data alone (CE, no device knowledge) — the "
              "LLM of the w/o SAML run at the same λ."]
    lines += ["", "## Table 1, homogeneous devices (three copies of one SLM)", "",
              "| SLM | λ | method | Device-1 | Device-2 | Device-3 | Server LLM | device mean |", "|---" * 8 + "|"]
    for slm in FAMILIES:
        for lam, _ in LAMBDAS:
            for m, label in HOMO:
                key = f"homo/{slm}/lambda{lam}/{m}"
                if r.runs(key):
                    lines.append(f"| {slm} | {lam} | {label} | "
                                 + " | ".join(_device_cells(r, key, llm=m == "coplms")) + " |")
    real = [(m, label) for m, label in REAL if r.runs(f"real/hetero/{m}")]
    if real:
        lines += ["", "## Table 1 with a real LLM (SmolLM2-135M-Instruct, its 3-block DPM; tiny-gpt2, tiny-opt, "
                  "tiny-bloom; λ = 1; hetero_smollm2.yaml)", "", head, "|---" * 7 + "|"]
        lines += [f"| 1 | {label} | " + " | ".join(_device_cells(r, f"real/hetero/{m}", llm=m != "standalone")) + " |"
                  for m, label in real]
    lines += ["", "## Table 2, ablations (heterogeneous devices)", "", head, "|---" * 7 + "|"]
    for lam, _ in LAMBDAS:
        for m, label in ABLATION:
            key = f"hetero/lambda{lam}/{m}" if m == "coplms" else f"ablation/lambda{lam}/{m}"
            if r.runs(key):
                lines.append(f"| {lam} | {label} | " + " | ".join(_device_cells(r, key)) + " |")
    lines += (multiple_choice(r) + control_table(r) + communication(r) + sweep(r) + curves(r, r.path.parent)
              + differences(r))
    return lines


def multiple_choice(r: Results) -> list[str]:
    """Table 1's multiple-choice half (the paper's MMLU columns): topic, the four-way question, scored by the
    generated answer against the right choice's text (Rouge-L / EM) with the choice-scoring accuracy beside, per
    device (accuracy), the device mean and the server LLM."""
    rows = [(f"hetero/lambda{lam}/{m}", lam, m, label) for lam, _ in LAMBDAS for m, label in HETERO]
    rows = [row for row in rows if r.runs(row[0])]
    if not rows:
        return []
    out = ["", "## Table 1, multiple-choice half (topic, the MMLU analogue; heterogeneous devices)", "",
           "Rouge-L / EM of the generated answer and, after ‖, the accuracy of scoring the four choices, ×100. The "
           "table above averages all four tasks, topic included.", "",
           "| λ | method | Device-1 acc | Device-2 acc | Device-3 acc | device mean | Server LLM |",
           "|---" * 7 + "|"]
    for key, lam, m, label in rows:
        devs = [_pct(r, key, f"acc_client_{c}/topic") for c in range(3)]
        mean = (f"{_pct(r, key, 'rougeL/task_topic')} / {_pct(r, key, 'em/task_topic')} ‖ "
                f"{_pct(r, key, 'acc/task_topic')}")
        llm = "n/a" if m == "standalone" else (
            f"{_pct(r, key, 'llm/rougeL/task_topic')} / {_pct(r, key, 'llm/em/task_topic')} ‖ "
            f"{_pct(r, key, 'llm/acc/task_topic')}")
        out.append(f"| {lam} | {label} | " + " | ".join([*devs, mean, llm]) + " |")
    return out


def sweep(r: Results) -> list[str]:
    """Co-PLMs one axis at a time (λ = 1): device-mean and server-LLM Rouge-L ×100 and the bytes the three devices
    upload per round at each value, the table's Co-PLMs row as the default point."""
    axes: dict[str, list[tuple[str, str]]] = {}
    for axis, value, label in SWEEP:
        axes.setdefault(label, [(SWEEP_DEFAULT[axis], "hetero/lambda1/coplms")]).append((value, f"sweep/{axis}{value}"))
    if not any(r.runs(k) for points in axes.values() for _, k in points[1:]):
        return []
    out = ["", "## Sweep (Co-PLMs, heterogeneous, λ = 1; one axis at a time, the default point is Table 1's row)", "",
           "| axis | value | device mean | server LLM | bytes up per round (three devices) | seeds |", "|---|---|---|---|---|---|"]
    for label, points in axes.items():
        for value, key in sorted(points, key=lambda p: float(p[0])):
            if r.runs(key):
                out.append(f"| {label} | {value} | {_pct(r, key, 'rougeL/mean')} | {_pct(r, key, 'llm/rougeL/mean')} "
                           f"| {r.final(key, 'bytes/up', 0)} | {len(r.runs(key))} |")
    return out


CURVE_METRICS = (("llm/rougeL/mean", "server LLM"), ("dpm/rougeL/mean", "server DPM (broadcast LoRA)"),
                 ("rougeL/mean", "device mean"))


def _curve(runs: list[dict], metric: str) -> tuple[list[int], list[float]]:
    """The mean over seeds of `metric` at each round every run scored."""
    per = [{x["round"]: x[metric] for x in rec["rounds"] if metric in x} for rec in runs]
    common = sorted(set.intersection(*(set(p) for p in per))) if per else []
    return common, [sum(p[x] for p in per) / len(per) for x in common]


def curves(r: Results, folder: Path = HERE) -> list[str]:
    """Per-round Rouge-L (×100) of the server LLM, the server's DPM and the devices, Co-PLMs against w/o SAML
    (λ = 1, every round scored): whether server SAML lowers the LLM, and when. Writes curves.png."""
    have = [(m, label, r.runs(f"curves/lambda1/{m}")) for m, label in CURVES]
    have = [(m, label, runs) for m, label, runs in have if runs]
    if not have:
        return []
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(CURVE_METRICS), figsize=(4.2 * len(CURVE_METRICS), 3.4), sharey=True)
    out = ["", "## Per-round scores (λ = 1, every round scored; curves.png)", "",
           "Rouge-L ×100, mean over seeds, after rounds 0 (before any training), 1, 5, 10 and 15. In the w/o SAML "
           "run the server's DPM is the averaged LoRA without domain adapters (server DST runs only before server "
           "SAML).", "", "| method (seeds) | " + " | ".join(label for _, label in CURVE_METRICS) + " |",
           "|---" * (len(CURVE_METRICS) + 1) + "|"]
    for _m, label, runs in have:
        cells = []
        for ax, (metric, what) in zip(axes, CURVE_METRICS):
            xs, ys = _curve(runs, metric)
            ax.plot(xs, [100 * y for y in ys], marker=".", label=f"{label} ({len(runs)} seeds)")
            ax.set_title(what, fontsize=9)
            ax.set_xlabel("round")
            ax.grid(alpha=0.3)
            at = dict(zip(xs, ys))
            cells.append(" → ".join(f"{100 * at[x]:.1f}" if x in at else "-" for x in (0, 1, 5, 10, 15)))
        out.append(f"| {label} ({len(runs)}) | " + " | ".join(cells) + " |")
    axes[0].set_ylabel("Rouge-L ×100")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(folder / "curves.png", dpi=100)
    plt.close(fig)
    return out


def communication(r: Results) -> list[str]:
    """Fig. 3's comparison: bytes per round each way (all three devices), λ = 1, from the runs' byte counts."""
    rows = [(f"hetero/lambda1/{m}", f"{label} (heterogeneous)") for m, label in HETERO[1:]]
    rows += [(f"homo/{FAMILIES[0]}/lambda1/{m}", f"{label} (homogeneous, {FAMILIES[0]})") for m, label in HOMO[1:]]
    rows = [(k, label) for k, label in rows if r.runs(k)]
    if not rows:
        return []
    out = ["", "## Communication per round (Fig. 3 analogue, λ = 1, three devices)", "",
           "| method | bytes up | bytes down |", "|---|---|---|"]
    for k, label in rows:
        out.append(f"| {label} | {r.final(k, 'bytes/up', 0)} | {r.final(k, 'bytes/down', 0)} |")
    return out


def differences(r: Results) -> list[str]:
    """fedlab's own ablation, not a paper claim: L_kt summed per answer (the paper's Eq. 7) against its mean per
    token (fedlab's default), paired over seeds (device-mean Rouge-L ×100)."""
    pairs = [(f"λ={lam}: Co-PLMs − L_kt summed per answer", f"hetero/lambda{lam}/coplms",
              f"ablation/lambda{lam}/coplms_kt_sum") for lam, _ in LAMBDAS]
    rows = differences_table(r, [(name, a, "rougeL/mean", b, "rougeL/mean") for name, a, b in pairs], digits=1,
                             scale=100, outdated=r.outdated(plan()))
    if not rows:
        return []
    return ["", "## fedlab's ablation, not a paper claim: L_kt summed per answer (Eq. 7) against its mean per token",
            "", "Device-mean Rouge-L ×100, paired over seeds.", "", *rows]


# The positive control: each model centrally LoRA-tuned on the pooled data ends MARGIN points above chance in
# exact match on every task, in every seed (one constant answer scores about chance).
MARGIN = 10.0


def learns(model: str, key: str | None = None):
    from fedlab.data.tasks import TASKS

    return above_chance(f"centralized {model}", [key or f"control/{model}/centralized"], CONTROL_TASKS,
                        lambda rec, t: rec["final"].get(f"em/task_{t}"), lambda t: TASKS[t].chance, MARGIN)


def devices(slms=("tiny-gpt2", "tiny-opt", "tiny-bloom")):
    return tuple(learns(m) for m in slms)


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
            out.append(Claim(f"λ={lam}: Co-PLMs above {label} (heterogeneous devices)", src, PAPER[lam][m], co,
                             f"hetero/lambda{lam}/{m}", DEVICE, control=devices(), shares=DEVICE_SHARES))
        for m, label in (("fedmkt", "FedMKT"), ("fedcollm", "FedCoLLM")):
            out.append(Claim(f"λ={lam}: Co-PLMs above {label}, server LLM", src, PAPER[lam][f"server {m}"], co,
                             f"hetero/lambda{lam}/{m}", SERVER, control=learns("tiny-llama"), shares=SERVER_SHARES))
        for m, label in ABLATION[1:3]:
            out.append(Claim(f"λ={lam}: Co-PLMs above {label}", "Table 2", PAPER[lam][m], co,
                             f"ablation/lambda{lam}/{m}", DEVICE, control=devices(), shares=DEVICE_SHARES))
        out.append(Claim(f"λ={lam}: Co-PLMs above w/o SAML, server LLM", "Table 2", PAPER[lam]["server coplms_no_saml"],
                         co, f"ablation/lambda{lam}/coplms_no_saml", SERVER, control=learns("tiny-llama"),
                         shares=SERVER_SHARES))
        for slm in FAMILIES:
            for m, label in HOMO[:-1]:
                out.append(Claim(f"λ={lam}, {slm}: Co-PLMs above {label} (homogeneous devices)", src,
                                 PAPER[lam][f"homo {m}"], f"homo/{slm}/lambda{lam}/coplms",
                                 f"homo/{slm}/lambda{lam}/{m}", DEVICE, control=devices((slm,)), shares=DEVICE_SHARES))
    real_llm = learns(REAL_LLM, f"real/control/{REAL_LLM}/centralized")
    out += [Claim("SmolLM2: Co-PLMs above Standalone (heterogeneous devices)", "Table 1", PAPER["1"]["standalone"],
                  "real/hetero/coplms", "real/hetero/standalone", DEVICE, control=devices(), shares=DEVICE_SHARES),
            Claim("SmolLM2: Co-PLMs above FedCoLLM (heterogeneous devices)", "Table 1", PAPER["1"]["fedcollm"],
                  "real/hetero/coplms", "real/hetero/fedcollm", DEVICE, control=devices(), shares=DEVICE_SHARES),
            Claim("SmolLM2: Co-PLMs above FedCoLLM, server LLM", "Table 1", PAPER["1"]["server fedcollm"],
                  "real/hetero/coplms", "real/hetero/fedcollm", SERVER, control=real_llm, shares=SERVER_SHARES)]
    return out


SYSTEM = System("Co-PLMs", "a distilled proxy of the LLM travels; on each device it and the device's own SLM learn from each other across tokenizers, with domain adapters", "experiments/coplms/make_tables.py", lambda: plan(),
                claims, run="fedlab run experiments/coplms/hetero.yaml")


if __name__ == "__main__":
    sys.exit(run_table(HERE, plan, render, title="coplms"))
