"""Run the FedMKT experiments behind the paper's Tables 2–4 at embedded scale and write
experiments/fedmkt/RESULTS.md and rounds.png (every number from the runs this script makes; all logged to
MLflow under one parent run; each run's record in results.json, `fedlab.evidence.runner`).

    python experiments/fedmkt/make_tables.py                  # all settings, seeds 0,1,2 (resumable)
    python experiments/fedmkt/make_tables.py --only hetero/   # one setting
    python experiments/fedmkt/make_tables.py --render-only    # rewrite RESULTS.md from results.json
"""
from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path

from fedlab.evidence import Claim, Planned, Results, System, above_zero_shot, metric_shares, page, run_table
from fedlab.evidence.stats import fmt_ci

HERE = Path(__file__).resolve().parent
TASKS = ["recall", "two_hop", "arithmetic", "category", "sentiment", "paraphrase", "entailment", "topic"]

@functools.cache
def left_out() -> dict[str, str]:
    """{task: why}: the tasks a reference of the tables learns in no seed on validation data at the rate chosen
    there (`python experiments/fedmkt/budget.py`, `fedlab.evidence.budget.unlearnt`). They stay in the training
    data and in the tables, and leave every claim: its means and its controls read the other tasks."""
    spec = importlib.util.spec_from_file_location("fedlab_table_fedmkt_budget", HERE / "budget.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    from fedlab.evidence.budget import unlearnt

    path = mod.OUT / "results.json"
    return unlearnt(Results(path), mod.GRID) if path.is_file() else {}


def scored() -> list[str]:
    """The tasks the claims read: every task but those `left_out`."""
    return [t for t in TASKS if t not in left_out()]


RUNS = {   # key -> (label, yaml)
    "hetero": [("hetero/fedmkt", "FedMKT", "hetero.yaml"),
               ("hetero/standalone", "Standalone", "hetero_standalone.yaml"),
               ("hetero/select_all", "FedMKT w/o DualMinCE", "hetero_select_all.yaml"),
               ("centralized", "Centralized", "centralized.yaml")],
    "homo": [("homo/fedmkt", "FedMKT", "homo.yaml"),
             ("homo/standalone", "Standalone", "homo_standalone.yaml"),
             ("homo/fedavg", "FedAvg", "homo_fedavg.yaml")],
    "one_to_one": [("o2o/fedmkt", "FedMKT", "one_to_one.yaml"),
                   ("o2o/llm2slm", "LLM2SLM", "one_to_one_llm2slm.yaml"),
                   ("o2o/standalone", "Standalone", "one_to_one_standalone.yaml"),
                   ("o2o/centralized", "Centralized", "one_to_one_centralized.yaml")],
}


# S1 of Tables 3 and 4: the SLMs share the LLM's tokenizer (tiny-llama-s: a 4-block LLaMA with tiny-llama's
# tokenizer, as the paper's LLaMA2-1.3B shares LLaMA2-7B's), so token alignment is the identity there
S1 = "tiny-llama-s"
RUNS_S1 = [("homo_s1/fedmkt", "FedMKT", "homo.yaml", [f"model.clients=[{S1},{S1},{S1},{S1}]"]),
           ("homo_s1/standalone", "Standalone", "homo_standalone.yaml", [f"model.clients=[{S1},{S1},{S1},{S1}]"]),
           ("homo_s1/fedavg", "FedAvg", "homo_fedavg.yaml", [f"model.name={S1}"]),
           ("o2o_s1/fedmkt", "FedMKT", "one_to_one.yaml", [f"model.clients=[{S1}]"]),
           ("o2o_s1/llm2slm", "LLM2SLM", "one_to_one_llm2slm.yaml", [f"model.clients=[{S1}]"]),
           ("o2o_s1/standalone", "Standalone", "one_to_one_standalone.yaml", [f"model.clients=[{S1}]"])]


# The paper runs FedMKT once per data set (Appendix D.2 splits each one): the per-task protocol, on the
# heterogeneous setting, with more data per task so that each client has 80 private samples.
PER_TASK = [("fedmkt", "FedMKT", "hetero.yaml"), ("standalone", "Standalone", "hetero_standalone.yaml"),
            ("centralized", "Centralized", "centralized.yaml")]
PER_TASK_DATA = ["data.train_per_task=400"]


def plan() -> list[Planned]:
    out = [Planned(k, HERE / y, (), label, s) for s, runs in RUNS.items() for k, label, y in runs]
    out += [Planned(k, HERE / y, tuple(o), label, k.split("/")[0]) for k, label, y, o in RUNS_S1]
    out += [Planned(f"task/{t}/{m}", HERE / y, (f"data.tasks=[{t}]", *PER_TASK_DATA), label, "per_task")
            for t in scored() for m, label, y in PER_TASK]
    return out + [Planned(k, HERE / y, tuple(o), label, "real") for k, label, y, *o in REAL]


# A real LLM: SmolLM2-135M-Instruct on the server of the heterogeneous setting (hetero_smollm2.yaml),
# and its centralized LoRA on the same data at the same lr 5e-4 (centralized_smollm2.yaml); `--only real/`
REAL = [("real/hetero/fedmkt", "FedMKT", "hetero_smollm2.yaml"),
        ("real/centralized", "Centralized", "centralized_smollm2.yaml"),
        # the SLMs' control at this budget: each SLM on its own data, as hetero/standalone
        ("real/hetero/standalone", "Standalone", "hetero_smollm2.yaml", "method.name=standalone")]


def summarize(cfg, history) -> dict:
    """Per model (each client's SLM, and the server's LLM where there is one): accuracy per task at
    round 0 and at the end, plus per-round means and communication."""
    def per_model(r: dict) -> dict:
        out = {}
        for c in range(cfg.data.num_clients):
            tasks = {t: r[f"acc_client_{c}/{t}"] for t in TASKS if f"acc_client_{c}/{t}" in r}
            if not tasks and len(cfg.data.tasks) == 1:   # one task: the client's accuracy is the task's
                tasks = {cfg.data.tasks[0]: r.get(f"acc/client_{c}")}
            out[f"client_{c}"] = {"model": cfg.model.client_model(c), "tasks": tasks, "mean": r.get(f"acc/client_{c}")}
        if "llm/acc/mean" in r:
            out["llm"] = {"model": cfg.model.name, "mean": r["llm/acc/mean"],
                          "tasks": {t: r[f"llm/acc/task_{t}"] for t in TASKS if f"llm/acc/task_{t}" in r}}
        return out

    from fedlab.data.federated import build_federated_data

    final = history.final
    rounds = [{"round": r["round"], "acc": r.get("acc/mean"), "llm": r.get("llm/acc/mean"),
               **{f"client_{c}": r.get(f"acc/client_{c}") for c in range(cfg.data.num_clients)},
               "bytes_up": r.get("bytes/up"), "bytes_down": r.get("bytes/down"),
               "server_kept": r.get("server/server_kept"), "client_kept": r.get("server/client_kept"),
               "knowledge_positions": r.get("server/knowledge_positions"),
               "paper_estimate_floats": r.get("server/paper_estimate_floats")} for r in history.rounds]
    return {"zero": per_model(history.rounds[0]), "final": per_model(final), "rounds": rounds,
            "public_size": len(build_federated_data(cfg.data, cfg.seed).public)}


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


def slm_task(which: str):
    """(record, task) → the mean over the record's clients of their accuracy on `task` ("mean": over their tasks)
    at round 0 ("zero") or the end ("final"); a centralized run's clients are the LLM."""
    def fn(rec, task):
        vals = [scored_mean(d) if task == "mean" else d["tasks"].get(task)
                for k, d in rec["summary"][which].items() if k.startswith("client_")]
        vals = [v for v in vals if v is not None]
        return sum(vals) / len(vals) if vals else None
    return fn


def _first(r: Results, key: str) -> dict | None:
    runs = r.runs(key)
    return runs[0] if runs else None


def intro() -> str:
    """The page's opening paragraph, with the tasks left out of the claims and why."""
    gone = "".join(f" **{t}** is scored and shown but left out of every claim and every mean: {why} "
                   "(`budget/RESULTS.md`)." for t, why in left_out().items())
    return INTRO + gone


INTRO = ("Server LLM: tiny-llama (LLaMA, SentencePiece-style tokenizer); SLMs: tiny-gpt2, tiny-opt, tiny-bloom "
         "(byte-level BPE, each with its own vocabulary) and tiny-qwen2 (byte-level BPE with single digits). Every "
         "row trains at lr 2e-3, chosen on validation data for every row alike (`budget/RESULTS.md`). Accuracy "
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

    for tag, slm_name in (("", "tiny-opt"), ("_s1", S1)):
        setting = "S1" if tag else "S2"
        homo, o2o = f"homo{tag}", f"o2o{tag}"
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
        L += ["## With a real LLM: SmolLM2-135M-Instruct on the server (hetero_smollm2.yaml; 40 training and 50 test "
              "items per task, 3 rounds)", "",
              "| row | LLM zero-shot | LLM final | SLMs zero-shot (mean of 4) | SLMs final |", "|---|---|---|---|---|",
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


def scored_mean(d: dict) -> float | None:
    """One model's mean accuracy over the `scored` tasks it has a score on (None when it has none)."""
    vals = [d["tasks"][t] for t in scored() if d["tasks"].get(t) is not None]
    return sum(vals) / len(vals) if vals else None


def slm(which: str):
    """A record → the mean over the `scored` tasks of its clients' SLMs (a centralized run's clients are the LLM) at round 0
    ("zero") or the end ("final")."""
    def fn(rec):
        vals = [scored_mean(d) for k, d in rec["summary"][which].items() if k.startswith("client_")]
        vals = [v for v in vals if v is not None]
        return sum(vals) / len(vals) if vals else None
    return fn


def llm(which: str):
    """A record → the server LLM's mean accuracy over the `scored` tasks at round 0 ("zero") or the end ("final")."""
    def fn(rec):
        d = rec["summary"][which].get("llm")
        return None if d is None else scored_mean(d)
    return fn


# The positive control: a reference row learns a task when it ends MARGIN points above its own zero-shot (round
# 0 of the same run) on it, in every seed. The SLMs' reference is Standalone (each SLM on its own data), the
# LLM's the centralized LLM (LoRA on the pooled data) of the same setting.
MARGIN = 2.0


def learns(name: str, rows, tasks=TASKS):
    """The control: every row in `rows` ends MARGIN points above its zero-shot on every task of `tasks`."""
    return above_zero_shot(name, rows, tasks, slm_task("final"), slm_task("zero"), MARGIN)


SLM_SHARES, SLM_ZERO = metric_shares("acc/mean"), metric_shares("acc/mean", "zero")
LLM_SHARES, LLM_ZERO = metric_shares("llm/acc/mean"), metric_shares("llm/acc/mean", "zero")


def _slm_claim(claim, source, paper, a, b, control, zero=False):
    """SLMs (the mean over the clients) of row a against row b's, or against their own zero-shot."""
    return Claim(claim, source, paper, a, b, slm("final"), fn_b=slm("zero") if zero else None, control=control,
                 shares=SLM_SHARES, shares_b=SLM_ZERO if zero else SLM_SHARES)


def _llm_zero(claim, source, paper, a, control):
    return Claim(claim, source, paper, a, a, llm("final"), fn_b=llm("zero"), control=control, shares=LLM_SHARES,
                 shares_b=LLM_ZERO)


def _llm_central(claim, source, paper, a, b, control, tolerance=2.0):
    """The LLM of row a comparable to the centralized LLM of row b, within `tolerance` points."""
    return Claim(claim, source, paper, a, b, llm("final"), fn_b=slm("final"), at_least=True, tolerance=tolerance,
                 control=control, shares=LLM_SHARES, shares_b=SLM_SHARES)



@functools.cache
def claims() -> list[Claim]:
    """The claims of Tables 2–4, each on the `scored` tasks, with the controls they rest on."""
    C_CENTRAL = learns("centralized LLM", ["centralized"], scored())
    C_SLMS = {s: learns(f"Standalone SLMs ({s})", [f"{s}/standalone"], scored()) for s in ("hetero", "homo", "o2o", "homo_s1", "o2o_s1")}
    C_O2O_LLM = learns("centralized LLM (one-to-one)", ["o2o/centralized"], scored())
    C_TASK_LLM = {t: learns(f"centralized LLM, {t} alone", [f"task/{t}/centralized"], [t]) for t in scored()}
    C_TASK_SLM = {t: learns(f"Standalone SLMs, {t} alone", [f"task/{t}/standalone"], [t]) for t in scored()}
    C_REAL_LLM = learns("centralized SmolLM2", ["real/centralized"], scored())
    C_REAL_SLM = learns("Standalone SLMs at the SmolLM2 budget", ["real/hetero/standalone"], scored())
    _PT = tuple(f"task/{t}/fedmkt" for t in scored())
    _PT_SLM, _PT_LLM = tuple(C_TASK_SLM.values()), tuple(C_TASK_LLM.values())
    return [
        _slm_claim("SLMs: FedMKT above zero-shot (heterogeneous, multi-task)", "Table 2", "49.3 vs 36.0 (+13.3)",
                   "hetero/fedmkt", "hetero/fedmkt", C_SLMS["hetero"], zero=True),
        _slm_claim("SLMs: FedMKT above Standalone (heterogeneous, multi-task)", "Table 2", "49.3 vs 46.4 (+2.9)",
                   "hetero/fedmkt", "hetero/standalone", C_SLMS["hetero"]),
        _llm_zero("LLM: FedMKT above zero-shot (heterogeneous, multi-task)", "Table 2", "60.9 vs 44.1 (+16.7)",
                  "hetero/fedmkt", C_CENTRAL),
        _llm_central("LLM: FedMKT comparable to Centralized, within 4 points (heterogeneous, multi-task)", "Table 2",
                     "60.9 vs 64.5 (−3.7)", "hetero/fedmkt", "centralized", C_CENTRAL, tolerance=4.0),
        _slm_claim("SLMs: FedMKT above zero-shot (one federation per task)", "Table 2", "49.3 vs 36.0 (+13.3)",
                   _PT, _PT, _PT_SLM, zero=True),
        _slm_claim("SLMs: FedMKT above Standalone (one federation per task)", "Table 2", "49.3 vs 46.4 (+2.9)",
                   _PT, tuple(f"task/{t}/standalone" for t in scored()), _PT_SLM),
        _llm_zero("LLM: FedMKT above zero-shot (one federation per task)", "Table 2", "60.9 vs 44.1 (+16.7)", _PT, _PT_LLM),
        _llm_central("LLM: FedMKT comparable to Centralized, within 4 points (one federation per task)", "Table 2",
                     "60.9 vs 64.5 (−3.7)", _PT, tuple(f"task/{t}/centralized" for t in scored()), _PT_LLM, tolerance=4.0),
        _llm_zero("SmolLM2-135M: LLM FedMKT above zero-shot (heterogeneous, multi-task)", "Table 2",
                  "60.9 vs 44.1 (+16.7)", "real/hetero/fedmkt", C_REAL_LLM),
        _slm_claim("SmolLM2-135M: SLMs FedMKT above zero-shot (heterogeneous, multi-task)", "Table 2",
                   "49.3 vs 36.0 (+13.3)", "real/hetero/fedmkt", "real/hetero/fedmkt", C_REAL_SLM, zero=True),
        _llm_central("SmolLM2-135M: LLM FedMKT comparable to Centralized, within 4 points", "Table 2",
                     "60.9 vs 64.5 (−3.7)", "real/hetero/fedmkt", "real/centralized", C_REAL_LLM, tolerance=4.0),
        _llm_central("LLM on entailment (RTE): FedMKT ≈ 96 % of Centralized, within 4 points", "Table 2 (RTE)",
                     "82.3 vs 85.9 (−3.6)", "task/entailment/fedmkt", "task/entailment/centralized",
                     C_TASK_LLM["entailment"], tolerance=4.0),
        _slm_claim("SLMs: FedMKT above Standalone (homogeneous, S2)", "Table 3", "50.5 vs 48.2 (+2.3)",
                   "homo/fedmkt", "homo/standalone", C_SLMS["homo"]),
        _slm_claim("SLMs: FedMKT above FedAvg (homogeneous, S2)", "Table 3", "50.5 vs 48.7 (+1.8)",
                   "homo/fedmkt", "homo/fedavg", C_SLMS["homo"]),
        _llm_central("LLM: FedMKT comparable to Centralized, within 2 points (homogeneous, S2)", "Table 3",
                     "64.1 vs 64.8 (−0.7)", "homo/fedmkt", "centralized", C_CENTRAL),
        _slm_claim("SLM: FedMKT above Standalone (one-to-one, S2)", "Table 4", "49.9 vs 48.4 (+1.4)",
                   "o2o/fedmkt", "o2o/standalone", C_SLMS["o2o"]),
        _slm_claim("SLM: FedMKT above LLM2SLM (one-to-one, S2)", "Table 4", "49.9 vs 49.0 (+0.8)",
                   "o2o/fedmkt", "o2o/llm2slm", C_SLMS["o2o"]),
        _llm_central("LLM: FedMKT comparable to Centralized, within 2 points (one-to-one, S2)", "Table 4",
                     "63.9 vs 63.5 (+0.4)", "o2o/fedmkt", "o2o/centralized", C_O2O_LLM),
        # S1: the SLMs share the LLM's tokenizer (LLaMA2-1.3B clients in the paper, tiny-llama-s here)
        _slm_claim("SLMs: FedMKT above Standalone (homogeneous, S1)", "Table 3", "50.7 vs 49.0 (+1.6)",
                   "homo_s1/fedmkt", "homo_s1/standalone", C_SLMS["homo_s1"]),
        _slm_claim("SLMs: FedMKT above FedAvg (homogeneous, S1)", "Table 3", "50.7 vs 48.9 (+1.8)",
                   "homo_s1/fedmkt", "homo_s1/fedavg", C_SLMS["homo_s1"]),
        _llm_central("LLM: FedMKT comparable to Centralized, within 2 points (homogeneous, S1)", "Table 3",
                     "63.3 vs 64.8 (−1.5)", "homo_s1/fedmkt", "centralized", C_CENTRAL),
        _slm_claim("SLM: FedMKT above Standalone (one-to-one, S1)", "Table 4", "49.5 vs 48.0 (+1.5)",
                   "o2o_s1/fedmkt", "o2o_s1/standalone", C_SLMS["o2o_s1"]),
        _slm_claim("SLM: FedMKT above LLM2SLM (one-to-one, S1)", "Table 4", "49.5 vs 49.2 (+0.3)",
                   "o2o_s1/fedmkt", "o2o_s1/llm2slm", C_SLMS["o2o_s1"]),
        _llm_central("LLM: FedMKT comparable to Centralized, within 2 points (one-to-one, S1)", "Table 4",
                     "63.2 vs 63.1 (+0.1)", "o2o_s1/fedmkt", "o2o/centralized", C_O2O_LLM),
    ]


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


SYSTEM = System("FedMKT", "an LLM and SLMs of other families distil into each other through selected top-K logits across tokenizers", "experiments/fedmkt/make_tables.py", lambda: plan(), lambda _r: claims(),
                run="fedlab run experiments/fedmkt/hetero.yaml")

if __name__ == "__main__":
    sys.exit(run_table(HERE, plan, render, title="fedmkt", summarize=summarize, after=plot_rounds))
