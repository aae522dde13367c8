"""Floe's RESULTS.md sections: the fusion gate, the experts, routing alignment, per task, model heterogeneity and the real LLM."""
from __future__ import annotations

from fedlab.evidence import (
    Results,
    constant_answer_note,
    differences_table,
)

from floe_rows import (
    BASELINES,
    EDGES,
    EXPERTS,
    FLOE,
    MC_TASKS,
    TASKS,
    items_per_task,
    per_task_metric,
    plan,
    share_metric,
    task_kind,
)


def gate_table(r: Results, stale: set[str] | None = None) -> list[str]:
    """The fusion gate of each fused row: the public answer tokens it trained on and those held out, the held-out
    NLL of the fused distribution against the SLM's and the LLM's alone, the share of runs whose check
    NLL(fused) ≤ min(NLL(SLM), NLL(LLM)) passed, and its mean w on the SLM per task; † marks the
    keys in `stale` (`Results.stale(plan())`, computed when not given)."""
    rows = [(f"floe/{key}", label) for key, label, _ in FLOE] + [("floe/real/floe", "Floe, SmolLM2 in the cloud")]
    rows = [(k, label) for k, label in rows if r.runs(k)]
    if not rows:
        return []
    stale = r.stale(plan()) if stale is None else stale
    out = ["", "## The fusion gate (held-out public answer tokens)", "",
           "| method | trained on (tokens) | held out (tokens) | NLL fused | NLL SLM | NLL LLM | check passed (share of "
           "runs) | " + " | ".join(f"w {t}" for t in TASKS) + " |", "|---" * (7 + len(TASKS)) + "|"]
    for k, label in rows:
        out.append(f"| {label}{' †' if k in stale else ''} | " + " | ".join(
            [r.final(k, "fused/gate_positions", 0), r.final(k, "fused/heldout_positions", 0),
             r.final(k, "fused/heldout_nll", 2), r.final(k, "fused/heldout_nll_slm", 2),
             r.final(k, "fused/heldout_nll_llm", 2), r.final(k, "fused/gate_check", 2)]
            + [r.final(k, f"fused/gate_w/{t}", 2) for t in TASKS]) + " |")
    return out + same_picks(r, [k for k, _ in rows])


def same_picks(r: Results, keys: list[str]) -> list[str]:
    """A sentence per fused row and multiple-choice task where the fused model's accuracy and answer share equal
    its routed SLM's in every seed: on that task the LLM's part of P_out does not change the fused model's score,
    whatever the gate's weight on the SLM (`fused/w/<task>`, its mean over the task's scored tokens; its range
    over the seeds is quoted)."""
    out = []
    for k in keys:
        runs = [rec["final"] for rec in r.runs(k)]
        for t in MC_TASKS:
            pairs = [(f.get(f"fused/acc/{t}"), f.get(f"routed/acc/{t}"), f.get(f"fused/top/{t}"),
                      f.get(f"routed/top/{t}")) for f in runs]
            if not runs or any(None in p or p[0] != p[1] or p[2] != p[3] for p in pairs):
                continue
            w = [f[f"fused/w/{t}"] for f in runs if f.get(f"fused/w/{t}") is not None]
            span = f"; the gate's mean w on its test tokens is {min(w):.2f} to {max(w):.2f}" if w else ""
            out.append(f"- `{k}`, **{t}**: fused and routed accuracy and answer share are equal in every seed "
                       f"({len(runs)} of {len(runs)}){span}: the LLM's part of P_out = w·P_SLM + (1 − w)·P_LLM does "
                       "not change the score there, and a claim of fused above routed on this task reads +0.0.")
    return ["", *out] if out else []


def experts_table(r: Results) -> list[str]:
    rows = [(key, label) for key, label, _ in EXPERTS if r.runs(f"floe/{key}")]
    if not rows:
        return []
    out = ["", "## Fig. 14 analogue: the number of experts (routed SLM, no LLM)", "",
           "| experts M | clusters (last round) | routed acc (MC) | routed Rouge-L | top-1 expert of the prompt's task "
           "(mean over tasks) | wall s |", "|---|---|---|---|---|---|"]
    for key, label in rows:
        k = f"floe/{key}"
        out.append(f"| {label} | " + " | ".join([r.final(k, "server/clusters/num", 1), r.final(k, "routed/acc/mean"),
                                                 r.final(k, "routed/rougeL/mean"), r.cell(k, top1_share),
                                                 r.cell(k, lambda rec: rec.get("seconds"), 0)]) + " |")
    return out + ["", "![Fig. 14](fig14_experts.png)"]


def alignment_table(r: Results) -> list[str]:
    """Routing alignment per task: the share of each task's test prompts whose top-1 expert is the
    expert of that task's domain (`routed/top1_share/<task>`), for every row that routes."""
    rows = [(key, label) for key, label, _ in FLOE if r.runs(f"floe/{key}")]
    rows = [(key, label) for key, label in rows
            if any(k.startswith("routed/top1_share/") for rec in r.runs(f"floe/{key}") for k in rec["final"])]
    if not rows:
        return []
    out = ["", "## Routing alignment per task (top-1 expert = the prompt's task's expert)", "",
           "Each cell: the share of the task's test prompts routed first to its own domain's expert, then the routed "
           "SLM's score on the task (accuracy on recall and sentiment, Rouge-L otherwise), so that where routing "
           "misses can be read against what the task scores.", "",
           "| method | " + " | ".join(f"{t}: aligned · score" for t in TASKS) + " |", "|---" * (len(TASKS) + 1) + "|"]
    for key, label in rows:
        k = f"floe/{key}"
        out.append(f"| {label} | " + " | ".join(f"{r.final(k, f'routed/top1_share/{t}')} · "
                                               f"{r.final(k, f'routed/{task_kind(t)}/{t}')}" for t in TASKS) + " |")
    return out


def top1_share(rec: dict) -> float | None:
    """Routing alignment of a run: how often the top-1 expert is the one whose domain is the prompt's task,
    averaged over the tasks."""
    v = [x for k, x in rec["final"].items() if k.startswith("routed/top1_share/")]
    return sum(v) / len(v) if v else None


def constant_tasks(r: Results, keys: list[str]) -> dict[str, str]:
    """The multiple-choice tasks on which every run of every row in `keys` (row keys without `floe/`) gave one
    answer to every item ("constant"), or did not log its answer share ("unknown"), read from the model each
    row is scored by (`share_metric`). Rouge-L tasks have no answer set and are not checked."""
    return r.constant_answers([f"floe/{k}" for k in keys], tasks=MC_TASKS, share=share_metric)


def per_task_table(r: Results) -> list[str]:
    rows = [(key, label) for key, label, _ in BASELINES + FLOE if r.runs(f"floe/{key}")]
    if not rows:
        return []
    out = ["", "## Table III analogue, per task (accuracy on recall and sentiment, Rouge-L on the others)", "",
           "| method | " + " | ".join(TASKS) + " |", "|---" * (len(TASKS) + 1) + "|"]
    for key, label in rows:
        out.append(f"| {label} | " + " | ".join(r.final(f"floe/{key}", per_task_metric(key, t)) for t in TASKS) + " |")
    note = constant_answer_note(r, [f"floe/{key}" for key, _ in rows], tasks=MC_TASKS, share=share_metric)
    return out + (note or ["", f"Constant-answer check ({', '.join(MC_TASKS)}): on each multiple-choice task at least "
                           "one run of one row gives more than one answer (the share of each run's most frequent "
                           "answer is logged as `top/…`)."])


def hetero_table(r: Results) -> list[str]:
    pairs = [("tiny-llama-s (shares the LLM's tokenizer)", "floe/slm_base", "floe/floe")] + \
            [(f"{m} (its own tokenizer)", f"floe/edge_{m}_base", f"floe/edge_{m}_floe") for m in EDGES]
    pairs = [p for p in pairs if r.runs(p[2])]
    if not pairs:
        return []
    out = ["", "## Table V analogue: model heterogeneity (cloud LLM tiny-llama, zero-shot)", "",
           "| edge SLM | SLM-only zero-shot acc | SLM-only, Floe's routed SLM acc | LLM-only acc | Floe acc | "
           "Floe − LLM-only (paired) | Floe Rouge-L | LLM-only Rouge-L |", "|---|---|---|---|---|---|---|---|"]
    for label, base, floe in pairs:
        d = r.paired(floe, "fused/acc/mean", "floe/llm_base", "acc/mean")
        gain = f"{d['mean']:+.3f} ± {d['half']:.3f}{' (sig.)' if d['significant'] else ''}" if d else "-"
        out.append(f"| {label} | " + " | ".join([r.final(base, "acc/mean"), r.final(floe, "routed/acc/mean"),
                                                 r.final("floe/llm_base", "acc/mean"), r.final(floe, "fused/acc/mean"),
                                                 gain, r.final(floe, "fused/rougeL/mean"),
                                                 r.final("floe/llm_base", "rougeL/mean")]) + " |")
    return out


def real_table(r: Results, stale: set[str] | None = None) -> list[str]:
    """Floe with SmolLM2-135M-Instruct as the cloud LLM, beside the LLM and the SLM alone; † marks a
    row in `stale` (records another config made than the one the script runs now; computed when not given)."""
    k = "floe/real/floe"
    if not r.runs(k):
        return []
    stale = r.stale(plan()) if stale is None else stale

    def m(key):
        return " †" if key in stale else ""
    out = ["", "## A real cloud LLM: SmolLM2-135M-Instruct fused with tiny-llama-s experts "
                f"({items_per_task(k)} items per task)", "",
           "| model | accuracy (MC) | Rouge-L |", "|---|---|---|",
           f"| LLM-only (SmolLM2 zero-shot){m('floe/real/llm_base')} | {r.final('floe/real/llm_base', 'acc/mean')} | "
           f"{r.final('floe/real/llm_base', 'rougeL/mean')} |",
           f"| SLM-only (tiny-llama-s zero-shot){m('floe/real/slm_base')} | {r.final('floe/real/slm_base', 'acc/mean')} | "
           f"{r.final('floe/real/slm_base', 'rougeL/mean')} |",
           f"| Floe's routed SLM (no LLM){m(k)} | {r.final(k, 'routed/acc/mean')} | {r.final(k, 'routed/rougeL/mean')} |",
           f"| Floe (fused with SmolLM2){m(k)} | {r.final(k, 'fused/acc/mean')} | {r.final(k, 'fused/rougeL/mean')} |",
           "", f"Mean fusion weight w on the SLM: {r.final(k, 'fused/w_mean')}."]
    return out


# fedlab's own comparisons, not paper claims (the paper has no such experiment)
FEDLAB_PAIRS = [("Floe, RTT 200 ± 100 ms − Floe at 80 ± 40 ms (acc)", "floe/floe_rtt200", "fused/acc/mean", "floe/floe",
                 "fused/acc/mean"),
                ("Floe full − compact fusion features (acc)", "floe/floe", "fused/acc/mean", "floe/floe_compact",
                 "fused/acc/mean"),
                ("Floe async − sync (acc)", "floe/floe_async", "fused/acc/mean", "floe/floe", "fused/acc/mean")]


def differences(r: Results) -> list[str]:
    """fedlab's own comparisons paired over seeds (no paper number or sign to test); no verdict on stale rows."""
    rows = differences_table(r, FEDLAB_PAIRS, outdated=r.outdated(plan()))
    return ["", "## fedlab's own comparisons, not paper claims, paired over seeds", "", *rows] if rows else []
