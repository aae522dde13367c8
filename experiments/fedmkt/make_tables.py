"""Run the FedMKT experiments behind the paper's Tables 2–4 at embedded scale and write
experiments/fedmkt/RESULTS.md and rounds.png (every number from the runs this script makes; all logged to
MLflow under one parent run; each run's record in results.json, `fedlab.evidence.runner`).

    python experiments/fedmkt/make_tables.py                  # all settings, seeds 0–4 (resumable)
    python experiments/fedmkt/make_tables.py --only hetero/   # one setting
    python experiments/fedmkt/make_tables.py --render-only    # rewrite RESULTS.md from results.json
"""
from __future__ import annotations

import sys
from pathlib import Path

from fedlab.evidence import TABLE_SEEDS, Results, System, metric_shares, page, run_table
from fedlab.evidence.stats import fmt_ci

# the table's parts, re-exported here: `fedlab.evidence.summary.load_table("fedmkt")` gives every name in one module
from fedmkt_claims import *
from fedmkt_rows import *


class Values(list):
    """A cell's per-seed values, with the collapse marker of the seeds they come from (`fedlab.evidence.collapse`)."""
    marker = ""


def _metric(model_key: str, task: str) -> str:
    """The final-metric name of one model's accuracy on `task` ("mean": over its tasks): the LLM's, one client's,
    or ("slms") the mean over the clients."""
    if model_key == "llm":
        return f"llm/acc/{'mean' if task == 'mean' else f'task_{task}'}"
    if model_key == "slms":
        return f"acc/{'mean' if task == 'mean' else f'task_{task}'}"
    c = model_key.removeprefix("client_")
    return f"acc/client_{c}" if task == "mean" else f"acc_client_{c}/{task}"


def _values(r: Results, key, which, model_key, task, value) -> Values:
    from fedlab.evidence.collapse import of_records

    out, runs = Values(), []
    for rec in r.runs(key):
        v = value(rec)
        if v is not None:
            out.append(v)
            runs.append(rec)
    out.marker = of_records(runs, metric_shares(_metric(model_key, task), which)).marker() if runs else ""
    return out


def _cell(r: Results, key, which, model_key, task) -> Values:
    """One model's accuracy (a task or its mean) in every seed's run of a row."""
    def value(rec):
        d = rec["summary"][which].get(model_key)
        return None if d is None else (scored_mean(d) if task == "mean" else d["tasks"].get(task))
    return _values(r, key, which, model_key, task, value)


def _slm_mean(r: Results, key, which, task) -> Values:
    """Per seed, the mean over the run's clients (Table 3: 'the average of all clients')."""
    return _values(r, key, which, "slms", task, lambda rec: slm_task(which)(rec, task))


def _centralized_llm(r: Results, key, which, task) -> Values:
    """A centralized run trains the LLM itself: its clients' numbers are the LLM's."""
    return _slm_mean(r, key, which, task)


def fmt(values) -> str:
    text = fmt_ci(values if isinstance(values, list) else [values])
    return text + getattr(values, "marker", "") if text != "-" else text


def _first(r: Results, key: str) -> dict | None:
    runs = r.runs(key)
    return runs[0] if runs else None


def intro() -> str:
    """The page's opening paragraph, with the tasks left out of the claims and why, and the tasks each kind of
    claim reads."""
    gone = "".join(f" **{t}** is scored and shown but left out of every claim and every mean: {why} "
                   "(`budget/RESULTS.md`)." for t, why in left_out().items())
    names = lambda ts: ", ".join(f"**{t}**" for t in ts) or "no task"
    reads = "".join(
        f" Claims on {who} read {names(claim_tasks(kind))}: the tasks their reference, the {REFERENCES[kind]}, "
        f"learns in every seed on validation data at the budget chosen for it"
        + (f" (it learns {names(t for t in scored() if t not in claim_tasks(kind))} in some seeds only; the tables' "
           "means still read them)" if len(claim_tasks(kind)) < len(scored()) else "") + "."
        for kind, who in WHO.items() if kind in ("llm", "slm") or chosen_for(kind))
    return INTRO + chosen_text() + gone + reads


def chosen_text() -> str:
    """What the validation pages chose, as they chose it: the rate and batch sizes, and the S2 family."""
    multi, o2o = chosen_budget(), chosen_budget(chain="one_to_one")
    family = chosen_budget("family").get("model.clients")
    if "federation.lr" not in multi:
        return ""
    batch = multi.get("federation.batch_size")
    text = (f" Every row trains at lr {multi['federation.lr']}"
            + (f" and batch size {batch}" if batch else "")
            + (f" (the one-to-one table at batch size {o2o['federation.batch_size']})" if o2o else "")
            + ", chosen on validation data for every row of a table alike (`budget/RESULTS.md`).")
    if family:
        text += (f" The S2 settings' SLMs are {family}, the family whose Standalone references learn the most "
                 "cells on validation data (`family/RESULTS.md`; the paper's S2 is OPT).")
    real = chosen_budget(chain="real").get("federation.lr")
    if real:
        text += (f" SmolLM2, the real-model rows' LLM, trains at lr {real} instead, chosen on validation data on "
                 "its centralized reference (`budget/RESULTS.md`).")
    return text


# who each kind of claim is about (`fedmkt_rows.REFERENCES`); a kind without a budget of its own reads the tasks
# of its `FALLBACK`, and the page names it with that one
WHO = {"llm": "the LLM", "slm": "the SLMs", "homo_s2": "the SLMs of the homogeneous S2 setting",
       "o2o_llm": "the LLM of the one-to-one table", "o2o_s2": "the SLM of the one-to-one S2 setting",
       "o2o_s1": "the SLM of the one-to-one S1 setting", "real_llm": "SmolLM2, the real-model rows' LLM"}


INTRO = ("Server LLM: tiny-llama (LLaMA, SentencePiece-style tokenizer); SLMs: tiny-gpt2, tiny-opt, tiny-bloom "
         "(byte-level BPE, each with its own vocabulary) and tiny-qwen2 (byte-level BPE with single digits). Accuracy "
         "per task on 300 test questions per task; every client holds every task (i.i.d. split of the private four "
         "fifths). Zero-shot rows are round 0 of the FedMKT run of the same setting. The paper's numbers are means "
         "over its data sets (computed from its tables); ours are means over the embedded tasks the claims score. The paper "
         "has no DualMinCE ablation: the *w/o DualMinCE* row has no claim to test.")


def render(r: Results) -> str:
    return page(r, SYSTEM, intro(), body(r))


def body(r: Results) -> list[str]:
    """The system's own tables (Tables 2–4, communication, the real LLM, the runs)."""
    L = []
    tasks = TASKS + ["mean"]
    het = _first(r, "hetero/fedmkt")
    if het:
        cols = [(f"client_{c}", het["summary"]["final"][f"client_{c}"]["model"]) for c in range(4)] + [
            ("llm", "tiny-llama (LLM)")]
        L += ["## Table 2 — heterogeneous setting (4 SLM families, one LLM)", "",
              "| task | method | " + " | ".join(n for _, n in cols) + " |", "|---|---|" + "---|" * len(cols)]
        for t in tasks:
            rows = [("Centralized", [[]] * 4 + [_centralized_llm(r, "centralized", "final", t)]),
                    ("Zero-Shot", [_cell(r, "hetero/fedmkt", "zero", k, t) for k, _ in cols]),
                    ("Standalone", [_cell(r, "hetero/standalone", "final", k, t) for k, _ in cols[:4]] + [[]]),
                    ("FedMKT", [_cell(r, "hetero/fedmkt", "final", k, t) for k, _ in cols]),
                    ("FedMKT w/o DualMinCE", [_cell(r, "hetero/select_all", "final", k, t) for k, _ in cols])]
            for i, (name, vals) in enumerate(rows):
                L.append(f"| {t if i == 0 else ''} | {name} | " + " | ".join(fmt(v) for v in vals) + " |")
        L.append("")
    def two_tables(title, note, top, bottom):
        """A table for the LLM and one for the SLMs, rows = tasks; columns = (header, value(task))."""
        L.extend([title, ""] + ([note, ""] if note else []))
        for cols in (top, bottom):
            L.extend(["| task | " + " | ".join(h for h, _ in cols) + " |", "|---|" + "---|" * len(cols)])
            L.extend(f"| {t} | " + " | ".join(fmt(fn(t)) for _, fn in cols) + " |" for t in tasks)
            L.append("")

    for tag in ("", "_s1"):
        setting = "S1" if tag else "S2"
        homo, o2o = f"homo{tag}", f"o2o{tag}"
        first = _first(r, f"{homo}/fedmkt") or _first(r, f"{o2o}/fedmkt")
        slm_name = first["summary"]["final"]["client_0"]["model"] if first else S1 if tag else "?"
        if r.runs(f"{homo}/fedmkt"):
            two_tables(f"## Table 3 — homogeneous setting ({setting}: four {slm_name} SLMs)",
                       "Top: the server's LLM. Bottom: the SLMs, averaged over the four clients."
                       + (" The SLMs share the LLM's tokenizer: token alignment is the identity." if tag else ""),
                       [("Zero-Shot", lambda t, k=homo: _cell(r, f"{k}/fedmkt", "zero", "llm", t)),
                        ("Centralized", lambda t: _centralized_llm(r, "centralized", "final", t)),
                        ("FedMKT", lambda t, k=homo: _cell(r, f"{k}/fedmkt", "final", "llm", t))],
                       [("Zero-Shot", lambda t, k=homo: _slm_mean(r, f"{k}/fedmkt", "zero", t)),
                        ("Standalone", lambda t, k=homo: _slm_mean(r, f"{k}/standalone", "final", t)),
                        ("FedAvg", lambda t, k=homo: _slm_mean(r, f"{k}/fedavg", "final", t)),
                        ("FedMKT", lambda t, k=homo: _slm_mean(r, f"{k}/fedmkt", "final", t))])
        if r.runs(f"{o2o}/fedmkt"):
            two_tables(f"## Table 4 — one-to-one setting ({setting}: the LLM and one {slm_name} SLM)", None,
                       [("LLM Zero-Shot", lambda t, k=o2o: _cell(r, f"{k}/fedmkt", "zero", "llm", t)),
                        ("LLM Centralized", lambda t: _centralized_llm(r, "o2o/centralized", "final", t)),
                        ("LLM FedMKT", lambda t, k=o2o: _cell(r, f"{k}/fedmkt", "final", "llm", t))],
                       [("SLM Zero-Shot", lambda t, k=o2o: _cell(r, f"{k}/fedmkt", "zero", "client_0", t)),
                        ("Standalone", lambda t, k=o2o: _cell(r, f"{k}/standalone", "final", "client_0", t)),
                        ("LLM2SLM", lambda t, k=o2o: _cell(r, f"{k}/llm2slm", "final", "client_0", t)),
                        ("FedMKT", lambda t, k=o2o: _cell(r, f"{k}/fedmkt", "final", "client_0", t))])
    ref = next((rec for rec in r.records.values() if rec["key"].startswith("task/") and rec["key"].endswith("/fedmkt")),
               None)
    if ref:
        cols = [(f"client_{c}", ref["summary"]["final"][f"client_{c}"]["model"]) for c in range(4)] + [
            ("llm", "tiny-llama (LLM)")]
        L += ["## Table 2b — heterogeneous setting, one federation per task (the paper's protocol)", "",
              "Each task is its own run, as each data set is in the paper: 400 training samples per task, a fifth "
              "of them public, 80 private samples per client; everything else as in Table 2. The mean row averages "
              "the tasks within each seed first.", "",
              "| task | method | " + " | ".join(n for _, n in cols) + " |", "|---|---|" + "---|" * len(cols)]
        means: dict = {}   # method -> column -> seed -> per-task values
        for t in scored():
            rows = [("Centralized", [[]] * 4 + [_centralized_llm(r, f"task/{t}/centralized", "final", t)]),
                    ("Zero-Shot", [_cell(r, f"task/{t}/fedmkt", "zero", k, t) for k, _ in cols]),
                    ("Standalone", [_cell(r, f"task/{t}/standalone", "final", k, t) for k, _ in cols[:4]] + [[]]),
                    ("FedMKT", [_cell(r, f"task/{t}/fedmkt", "final", k, t) for k, _ in cols])]
            if not any(rows[3][1]):
                continue
            for i, (name, vals) in enumerate(rows):
                for j, per_seed in enumerate(vals):
                    for s_i, v in enumerate(per_seed):
                        means.setdefault(name, {}).setdefault(j, {}).setdefault(s_i, []).append(v)
                L.append(f"| {t if i == 0 else ''} | {name} | " + " | ".join(fmt(v) for v in vals) + " |")
        n_tasks = sum(1 for t in scored() if r.runs(f"task/{t}/fedmkt"))
        for i, (name, by_col) in enumerate(means.items()):
            avg = [[sum(v) / len(v) for v in by_col.get(j, {}).values() if len(v) == n_tasks] for j in range(len(cols))]
            L.append(f"| {'mean' if i == 0 else ''} | {name} | " + " | ".join(fmt(v) for v in avg) + " |")
        L.append("")
    comm = [(k, _first(r, k)) for k in ("hetero/fedmkt", "homo/fedmkt", "o2o/fedmkt", "o2o/llm2slm", "homo/fedavg",
                                        "homo_s1/fedmkt", "o2o_s1/fedmkt", "homo_s1/fedavg")
            if r.runs(k)]
    if comm:
        L += ["## Communication per round (Appendix C)", "",
              "Measured bytes of one round (round 1 of the first seed; uplink = all clients' knowledge messages, downlink = the "
              "LLM's knowledge sent to every client), beside Appendix C's estimate N·S·K floats per message with "
              "N = public samples, S = model.max_length (96), K = 16. fedlab sends only the positions a sample "
              "has (ragged), 4-byte ids and 4-byte logits.", "",
              "| run | N | positions sent (all clients) | uplink MB | downlink MB | N·S·K per client (floats) | "
              "N·S·K × clients × 4 B (MB) | selection: server kept | clients kept |",
              "|---|---|---|---|---|---|---|---|---|"]
        for k, rec in comm:
            m = rec["summary"]
            r1 = m["rounds"][1]
            n_clients = sum(1 for x in m["final"] if x.startswith("client_"))
            est = r1.get("paper_estimate_floats")
            L.append(f"| {k} ({rec['label']}) | {m['public_size']} | {r1.get('knowledge_positions') or '-'} | "
                     f"{r1['bytes_up'] / 1e6:.3f} | {r1['bytes_down'] / 1e6:.3f} | {est or '-'} | "
                     f"{fmt(est * n_clients * 4 / 1e6) if est else '-'} | {fmt(r1.get('server_kept'))} | "
                     f"{fmt(r1.get('client_kept'))} |")
        L.append("")
    if r.runs("real/hetero/fedmkt"):
        cfg = next(p for p in plan() if p.key == "real/hetero/fedmkt").resolve(0)
        L += [f"## With a real LLM: SmolLM2-135M-Instruct on the server (hetero_smollm2.yaml; "
              f"{cfg.data.train_per_task} training and {cfg.data.test_per_task} test items per task, "
              f"{cfg.federation.rounds} rounds)", ""]
        old = sorted(k for k in r.outdated(plan()) if k.startswith("real/"))
        if old:
            L += [f"Another config made the records of {', '.join(f'`{k}`' for k in old)} (the page's *Not current* "
                  "line): their cells answer that config's question, not the one the heading states, until the rows "
                  "are re-run.", ""]
        L += ["| row | LLM zero-shot | LLM final | SLMs zero-shot (mean of 4) | SLMs final |", "|---|---|---|---|---|",
              f"| FedMKT | {r.cell('real/hetero/fedmkt', llm('zero'))} | {r.cell('real/hetero/fedmkt', llm('final'))} | "
              f"{r.cell('real/hetero/fedmkt', slm('zero'))} | {r.cell('real/hetero/fedmkt', slm('final'))} |"]
        if r.runs("real/centralized"):
            L.append(f"| Centralized (SmolLM2's LoRA on all the data) | - | "
                     f"{r.cell('real/centralized', slm('final'))} | - | - |")
        L.append("")
    L += ["## Runs", "", "| key | command | seconds | MLflow run |", "|---|---|---|---|"]
    for k, m in r.records.items():
        L.append(f"| {k} | `{m['command']}` | {m['seconds']} | {m['run_id']} |")
    return L


def plot_rounds(r: Results, path: Path = HERE / "rounds.png") -> None:
    """Accuracy per round of every SLM and the LLM in the heterogeneous setting (first seed)."""
    rec = _first(r, "hetero/fedmkt")
    if not rec:
        return
    m = rec["summary"]
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    rounds = [x["round"] for x in m["rounds"]]
    for c in range(4):
        ax.plot(rounds, [x[f"client_{c}"] for x in m["rounds"]], marker=".",
                label=f"{m['final'][f'client_{c}']['model']} (SLM)")
    ax.plot(rounds, [x["llm"] for x in m["rounds"]], color="black", linewidth=2.5, marker="o", label="tiny-llama (LLM)")
    sa = _first(r, "hetero/standalone")
    if sa:
        for c in range(4):
            ax.axhline(sa["summary"]["final"][f"client_{c}"]["mean"], color=f"C{c}", linestyle=":", alpha=0.7)
    ax.set_xlabel("round (0 = zero-shot); dotted: each SLM standalone after the same budget")
    ax.set_ylabel("mean accuracy over 8 tasks")
    ax.set_title("FedMKT, heterogeneous setting")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def shown_controls(_r=None) -> list:
    """Controls the page shows that no claim rests on: the one-to-one centralized LLM at the seeds its claims
    compare, whose control is its copy at seeds of its own (`fedmkt_rows.O2O_CONTROL`)."""
    return [learns("centralized LLM (one-to-one), at the compared seeds (shown; the claims rest on its copy)",
                   ["o2o/centralized"], claim_tasks("o2o_llm"))]


SYSTEM = System("FedMKT", "an LLM and SLMs of other families distil into each other through selected top-K logits across tokenizers", "experiments/fedmkt/make_tables.py", lambda: plan(), lambda _r: claims(),
                controls=shown_controls, run="fedlab run experiments/fedmkt/hetero.yaml")

if __name__ == "__main__":
    sys.exit(run_table(HERE, plan, render, title="fedmkt", summarize=summarize, after=plot_rounds,
                       default_seeds=TABLE_SEEDS))
