"""Floe's inference phase on the device (SPEC §4.2): the router mixes the expert pool per prompt
(`fedlab.methods.floe.router`); the routed SLM is scored on the shared test sets, example by example (each
prompt has its own gate, hence its own weights).

Prompt and expert embeddings come from `method.router_encoder`: `slm` — the base SLM's mean final hidden
state over the prompt's tokens (no extra model on the device) — or a sentence encoder such as `minilm-l6`."""
from __future__ import annotations

import torch

from fedlab.eval.generation import generation_scores
from fedlab.eval.multiple_choice import mc_accuracy
from fedlab.methods.floe.behaviour import text_hidden
from fedlab.methods.floe.router import expert_domains, expert_embeddings, gate, mixture_state
from fedlab.transforms import set_state


def make_embedder(name: str, resident, max_length: int):
    """texts -> [N, D] normalised embeddings (see the module docstring)."""
    if name == "slm":
        def embed(texts):
            set_state(resident.model, resident.init_state)          # B = 0: the base SLM
            rows = text_hidden(resident.model, resident.tokenizer, list(texts), max_length)
            return torch.nn.functional.normalize(rows, dim=-1)
        return embed
    from fedlab.models.zoo import load_encoder, sentence_embeddings

    enc, tok = load_encoder(name)
    return lambda texts: sentence_embeddings(enc, tok, list(texts))


class Router:
    """The expert pool, each expert's embedding Γ_j and the gate of any prompt."""

    def __init__(self, centres, axes, embed, public, base_state, resident, max_length: int, k: int = 32,
                 temperature: float = 1.0):
        by_task: dict[str, list] = {}
        for e in public:
            by_task.setdefault(e.task, []).append(e)
        self.centres, self.axes, self.embed, self.temperature = centres, axes, embed, temperature
        self.domains, self.gains = expert_domains(resident.model, resident.tokenizer, centres, base_state,
                                                  {t: ex[:k] for t, ex in by_task.items()}, max_length)
        self.experts = expert_embeddings(embed, [[e.prompt for e in by_task[d][:k]] for d in self.domains])

    def gates(self, prompts: list[str]) -> torch.Tensor:
        return gate(self.embed(prompts), self.experts, self.temperature)

    def state(self, weights) -> dict:
        return mixture_state(self.centres, weights, self.axes)


def evaluate_routed(router: Router, resident, data, cfg, tasks=None) -> dict:
    """{"routed/acc/<task>" | "routed/rougeL/<task>", …, "routed/acc/mean", "routed/top1_share/<task>"}: each test
    example scored by the routed SLM (`resident` is the rank-M·r_max LoRA model), and how often the top-1 expert
    is the one whose domain is the example's task (routing alignment)."""
    out, accs, rouges = {}, [], []
    for task in tasks or list(data.test):
        examples = data.test_examples(task)
        if cfg.eval.max_per_task:
            examples = examples[: cfg.eval.max_per_task]
        w = router.gates([e.prompt for e in examples])
        score = 0.0
        for ex, wi in zip(examples, w):
            set_state(resident.model, router.state(wi))
            if ex.is_choice:
                score += mc_accuracy(resident.model, resident.tokenizer, [ex], cfg.eval.length_normalized,
                                     cfg.model.max_length, 1)
            else:
                score += generation_scores(resident.model, resident.tokenizer, [ex])["rougeL"]
        score /= max(len(examples), 1)
        key = "acc" if examples and examples[0].is_choice else "rougeL"
        out[f"routed/{key}/{task}"] = score
        (accs if key == "acc" else rouges).append(score)
        top = w.argmax(dim=1).tolist()
        out[f"routed/top1_share/{task}"] = sum(router.domains[j] == task for j in top) / max(len(top), 1)
    if accs:
        out["routed/acc/mean"] = sum(accs) / len(accs)
    if rouges:
        out["routed/rougeL/mean"] = sum(rouges) / len(rouges)
    return out
