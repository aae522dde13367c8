"""FedMKT's table rows: the settings of Tables 2-4, the per-task protocol, the real-LLM rows, the tasks the claims score, and what each run's record keeps."""
from __future__ import annotations

import functools
from pathlib import Path

from fedlab.evidence import Planned, budget

HERE = Path(__file__).resolve().parent
TASKS = ["recall", "two_hop", "arithmetic", "category", "sentiment", "paraphrase", "entailment", "topic"]
# how the budget pages (budget.py, family.py) score their rows: 300 validation rows a task, as many as a test set
# (a +2-point bar is six items, not one in 32), about the population its test set asks about and in its answer
# shares (a validation set of one answer is cleared by a model that gives only that answer; a task validated on
# prompts held out of its training rows holds them out in those shares too, or recall's would carry the training
# population's answers, which a model learns to give and its test set does not ask), and the training rows the
# tables' (`fedlab.evidence.budget.held_validation`)
VALIDATION = budget.held_validation(300, 32, keeps_shares=True, holdout_keeps_shares=True)


@functools.cache
def left_out() -> dict[str, str]:
    """{task: why}: the tasks a reference of the multi-task tables learns in no seed on validation data at the
    budget chosen there (the rate, then the batch size: `python experiments/fedmkt/budget.py`,
    `fedlab.evidence.budget.left_out`). They stay in the training
    data and in the tables, and leave every claim: its means and its controls read the other tasks."""
    from fedlab.evidence.budget import left_out as of_table

    return of_table(HERE)


def scored() -> list[str]:
    """The tasks the tables' means read: every task but those `left_out`."""
    return [t for t in TASKS if t not in left_out()]


# the budget's controls whose tasks each kind of claim reads, and where they were chosen: the multi-task tables'
# references (budget.py: the rate, then the batch size), the S2 SLMs of the homogeneous setting (family.py) and
# the one-to-one table's own references (budget.py's `one_to_one`), and SmolLM2's (budget.py's `real`)
REFERENCES = {"llm": "centralized LLM", "slm": "Standalone SLMs (hetero)", "homo_s2": "Standalone SLMs (homo, S2)",
              "o2o_llm": "centralized LLM (one-to-one)", "o2o_s2": "Standalone SLMs (o2o, S2)",
              "o2o_s1": "Standalone SLMs (o2o, S1)", "real_llm": "centralized SmolLM2"}
# before its own page has chosen, a kind reads what the multi-task reference of its model learns
FALLBACK = {"homo_s2": "slm", "o2o_llm": "llm", "o2o_s2": "slm", "o2o_s1": "slm", "real_llm": "llm"}


@functools.cache
def _learnt() -> dict[str, tuple[str, ...]]:
    from fedlab.evidence.budget import learnt_in

    return {**learnt_in(HERE), **learnt_in(HERE, "family"), **learnt_in(HERE, chain="one_to_one"),
            **learnt_in(HERE, chain="real")}


@functools.cache
def chosen_budget(script: str = "budget", chain: str | None = None) -> dict[str, str]:
    """{config key: the value chosen} along one chain of validation pages (`fedlab.evidence.budget.chain_of`):
    the multi-task tables' rate and batch size, `chain="one_to_one"` the one-to-one table's batch size,
    `chain="real"` SmolLM2's rate,
    `script="family"` the S2 SLM family. {} before a page has records (`fedlab.evidence.budget.choices_in`)."""
    from fedlab.evidence.budget import choices_in

    return choices_in(HERE, script, chain)


def chosen_for(kind: str) -> bool:
    """Whether the reference of `kind` has a budget chosen for it (else its claims read `FALLBACK`'s tasks)."""
    return REFERENCES[kind] in _learnt()


@functools.cache
def claim_tasks(kind: str) -> list[str]:
    """The `scored` tasks a claim of `kind` reads: those its reference (`REFERENCES`: the centralized LLM or the
    Standalone SLMs of the claim's setting) learns in every seed on validation data at the budget chosen there
    (`fedlab.evidence.budget.learnt_in`). A task a reference learns in some seeds only stays in the tables and
    their means, and leaves that kind of claim. A kind whose page has not chosen reads its `FALLBACK`'s tasks;
    every scored task before the budget has chosen."""
    got = _learnt().get(REFERENCES[kind])
    if got is None and kind in FALLBACK:
        return claim_tasks(FALLBACK[kind])
    return [t for t in scored() if got is None or t in got]


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


# The one-to-one centralized LLM is both a row the one-to-one LLM claims compare and their reference. Its control
# is the same row made at seeds no claim compares (CONTROL_SEEDS), so that the tasks those claims keep where it
# fails some (`fedlab.evidence.claims.narrow`) are chosen without reading the seeds the claims compare.
O2O_CONTROL = "o2o/control/centralized"
CONTROL_SEEDS = (5, 6, 7, 8, 9)


def plan() -> list[Planned]:
    out = [Planned(k, HERE / y, (), label, s) for s, runs in RUNS.items() for k, label, y in runs]
    out += [Planned(O2O_CONTROL, HERE / "one_to_one_centralized.yaml", (), "Centralized (the control)", "one_to_one",
                    CONTROL_SEEDS)]
    out += [Planned(k, HERE / y, tuple(o), label, k.split("/")[0]) for k, label, y, o in RUNS_S1]
    out += [Planned(f"task/{t}/{m}", HERE / y, (f"data.tasks=[{t}]", *PER_TASK_DATA), label, "per_task")
            for t in scored() for m, label, y in PER_TASK]
    return out + [Planned(k, HERE / y, (*o, *real_rate(k)), label, "real") for k, label, y, *o in REAL]


def real_rate(key: str) -> tuple[str, ...]:
    """The override that runs the real-model row `key`'s LLM at the rate SmolLM2's grid chose (`budget.py`'s
    `real`): FedMKT's server LoRA (`method.server_lr`) and the centralized reference's `federation.lr`; () before
    it has chosen (the YAMLs' 5e-4) and for the SLMs' Standalone row."""
    lr = chosen_budget(chain="real").get("federation.lr")
    if lr is None or key.endswith("/standalone"):
        return ()
    return (f"method.server_lr={lr}",) if key.endswith("/fedmkt") else (f"federation.lr={lr}",)


# A real LLM: SmolLM2-135M-Instruct on the server of the heterogeneous setting (hetero_smollm2.yaml),
# and its centralized LoRA on the same data at the same rate (centralized_smollm2.yaml); `--only real/`
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
