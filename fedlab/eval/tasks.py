"""Evaluate a model on the test sets of a federated data view: one task, or every client's tasks."""
from __future__ import annotations

from fedlab.comm.messages import EvalRes
from fedlab.eval.generation import generation_scores
from fedlab.eval.multiple_choice import mc_accuracy


def evaluate_task(model, tokenizer, data, task: str, cfg, cid: int | None = None) -> dict:
    """{"acc/<task>", "n/<task>"} for multiple choice, {"rougeL/<task>", "em/<task>", "n/<task>"} otherwise,
    on the task's shared test set or (with `cid` and per-client test splits) the client's own."""
    examples = data.test_examples(task, cid)
    if cfg.eval.max_per_task:
        examples = examples[: cfg.eval.max_per_task]
    if examples and examples[0].is_choice:
        acc = mc_accuracy(model, tokenizer, examples, cfg.eval.length_normalized, cfg.model.max_length,
                          cfg.eval.batch_size, shared=cfg.eval.scorer == "shared")
        return {f"acc/{task}": acc, f"n/{task}": len(examples)}
    scores = generation_scores(model, tokenizer, examples)
    return {f"rougeL/{task}": scores["rougeL"], f"em/{task}": scores["em"], f"n/{task}": len(examples)}


def evaluate_on_clients(model, tokenizer, data, cfg, round_: int = -1) -> dict[int, EvalRes]:
    """The same model on every client's tasks (each task scored once), as per-client EvalRes so that
    `summarize_eval` gives per-client, per-task and mean accuracy exactly as for client-side evaluation."""
    per_task = {t: evaluate_task(model, tokenizer, data, t, cfg) for t in data.test}
    out = {}
    for cid in range(data.num_clients):
        metrics = {}
        for t in data.client_tasks(cid):
            metrics.update(per_task[t])
        out[cid] = EvalRes(cid, round_, metrics)
    return out


def evaluate_server_model(model, tokenizer, data, cfg, prefix: str = "") -> dict:
    """A server-side model (an LLM, a DPM, a proxy-tuned LLM) scored on every client's tasks: the means and
    per-task scores of `server_summary` (no per-client copies of the same numbers), keys under `prefix`."""
    from fedlab.eval.summary import server_summary

    return {prefix + k: v for k, v in server_summary(evaluate_on_clients(model, tokenizer, data, cfg)).items()}
