"""Co-PLMs' RESULTS.md sections: the controls, multiple choice, the sweeps, the curves, communication and fedlab's own comparisons."""
from __future__ import annotations

from pathlib import Path

from fedlab.evidence import (
    Results,
    differences_table,
    metric_shares,
)

from coplms_rows import (
    CONTROL_MODELS,
    CONTROL_TASKS,
    CURVES,
    FAMILIES,
    HERE,
    HETERO,
    HOMO,
    LAMBDAS,
    SWEEP,
    SWEEP_DEFAULT,
    plan,
)


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


def _pct(r: Results, key: str, metric: str, shares: str | None = None) -> str:
    """`metric` ×100 over the row's seeds; with `shares` (an accuracy metric of the same model) the collapse marker
    of that model's multiple-choice answers (the generated answers log no share)."""
    return r.cell(key, lambda rec: None if rec["final"].get(metric) is None else 100 * rec["final"][metric], 1,
                  shares=metric_shares(shares) if shares else None)


def _device_cells(r: Results, key: str, devices: int = 3, llm: bool = True, llm_key: str | None = None,
                  claims_score=None) -> list[str]:
    """Each device's Rouge-L / EM, the server LLM's (from `llm_key`'s runs when given), the device mean, and with
    `claims_score` (`coplms_claims.device_score`) the devices' Rouge-L over the cells the claims read."""
    cells = []
    for c in range(devices):
        cells.append(f"{_pct(r, key, f'rougeL/client_{c}')} / {_pct(r, key, f'em/client_{c}', f'acc/client_{c}')}")
    lk = llm_key or key
    cells.append(f"{_pct(r, lk, 'llm/rougeL/mean')} / {_pct(r, lk, 'llm/em/mean', 'llm/acc/mean')}"
                 + ("*" if llm_key else "") if llm or llm_key else "n/a")
    cells.append(f"{_pct(r, key, 'rougeL/mean')} / {_pct(r, key, 'em/mean', 'acc/mean')}")
    if claims_score is not None:
        cells.append(r.cell(key, lambda rec: None if (v := claims_score(rec)) is None else 100 * v, 1))
    return cells


def _seeds(r: Results) -> str:
    seeds = sorted({rec["seed"] for rec in r.records.values()})
    return ", ".join(map(str, seeds)) or "none yet"


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
