"""Evaluate a model on the test sets of a federated data view: one task, or every client's tasks."""
from __future__ import annotations

from fedlab.comm.messages import EvalRes
from fedlab.eval import cache
from fedlab.eval.generation import generation_scores
from fedlab.eval.multiple_choice import accuracy_of, mc_predictions, top_answer_share


def evaluate_task(model, tokenizer, data, task: str, cfg, cid: int | None = None,
                  model_hash: str | None = None) -> dict:
    """{"acc/<task>", "top/<task>" (the share of the model's most frequent answer: 1.0 = one constant answer),
    "n/<task>"} for multiple choice (with `eval.mc_generate` also "rougeL/<task>", "em/<task>" of the generated
    answer against the right choice's text), {"rougeL/<task>", "em/<task>", "n/<task>"} otherwise,
    on the task's shared test set or (with `cid` and per-client test splits) the client's own. With
    `eval.cache` (the default) and a model whose outputs its digest determines, a score computed before on the
    same model, questions and settings is read from `fedlab.eval.cache` instead (`model_hash`: the model's
    digest when the caller has it already)."""
    examples = data.test_examples(task, cid)
    if cfg.eval.max_per_task:
        examples = examples[: cfg.eval.max_per_task]
    choice = bool(examples) and examples[0].is_choice
    key = None
    if cfg.eval.cache and examples and cache.cacheable(model):
        settings = ({"kind": "choice", "length_normalized": cfg.eval.length_normalized,
                     "max_length": cfg.model.max_length, "batch_size": cfg.eval.batch_size,
                     "scorer": cfg.eval.scorer} if choice else {"kind": "generation"})
        if choice and cfg.eval.mc_generate:
            settings["mc_generate"] = True
        key = cache.score_key(model_hash or cache.model_digest(model), tokenizer, examples, settings,
                              next(model.parameters()).device.type)
        hit = cache.load(key)
        if hit is not None:
            return hit
    if choice:
        predicted = mc_predictions(model, tokenizer, examples, cfg.eval.length_normalized, cfg.model.max_length,
                                   cfg.eval.batch_size, shared=cfg.eval.scorer == "shared")
        out = {f"acc/{task}": accuracy_of(examples, predicted), f"top/{task}": top_answer_share(examples, predicted), f"n/{task}": len(examples)}
        if cfg.eval.mc_generate:      # the answer generated, against the right choice's text
            scores = generation_scores(model, tokenizer, examples)
            out.update({f"rougeL/{task}": scores["rougeL"], f"em/{task}": scores["em"]})
    else:
        scores = generation_scores(model, tokenizer, examples)
        out = {f"rougeL/{task}": scores["rougeL"], f"em/{task}": scores["em"], f"n/{task}": len(examples)}
    if key is not None:
        cache.store(key, out)
    return out


def evaluate_on_clients(model, tokenizer, data, cfg, round_: int = -1) -> dict[int, EvalRes]:
    """The same model on every client's tasks (each task scored once), as per-client EvalRes so that
    `summarize_eval` gives per-client, per-task and mean accuracy exactly as for client-side evaluation."""
    model_hash = cache.model_digest(model) if cfg.eval.cache and cache.cacheable(model) else None
    per_task = {t: evaluate_task(model, tokenizer, data, t, cfg, model_hash=model_hash) for t in data.test}
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
