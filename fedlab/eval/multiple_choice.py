"""Multiple-choice accuracy by the summed log-likelihood of each choice given the prompt (lm-eval style),
and its length-normalised variant (log-likelihood divided by the choice's length in characters).

Scoring runs each prompt once: a batch of prompts (left-padded) fills a key/value cache, the cache is
repeated once per choice, and the choices' tokens run on top of it — instead of one full forward pass per
(prompt, choice) pair. The sums are the same quantities as scoring each pair on its own (`shared=False`,
kept as the reference and for prompts that would need truncating)."""
from __future__ import annotations

import weakref
from collections import Counter

import torch
import torch.nn.functional as F

from fedlab.data.collate import PadCollator, continuation_ids
from fedlab.data.tasks import Example
from fedlab.models.modes import eval_mode

# encodings per tokenizer object, by (prompt, choices): a run scores the same test prompts at every
# evaluation, and tokenising them again was a fifth of each evaluation's time on the tiny models
_ENCODED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _encode(tokenizer, examples: list[Example]) -> list[tuple[list[int], list[list[int]]]]:
    """Per example: the prompt's token ids and each choice's continuation ids (as scored after it);
    remembered per tokenizer object (the lists returned are shared: callers do not modify them)."""
    try:
        memo = _ENCODED.setdefault(tokenizer, {})
    except TypeError:          # an object that takes no weak reference: encode without remembering
        memo = {}
    out = []
    for ex in examples:
        key = (ex.prompt, tuple(ex.choices))
        hit = memo.get(key)
        if hit is None:
            pairs = [continuation_ids(tokenizer, ex.prompt, " " + c) for c in ex.choices]
            hit = memo[key] = (pairs[0][0], [cont for _, cont in pairs])
        out.append(hit)
    return out


@torch.no_grad()
def _score_pairs(model, pad_id: int, items: list[tuple[list[int], list[int]]], max_length: int,
                 batch_size: int, device) -> list[float]:
    """Summed log-probability of each continuation after its context, one full sequence per pair."""
    seqs = []
    for ctx, cont in items:
        ctx = ctx[-(max_length - len(cont)):]
        seqs.append({"input_ids": ctx + cont, "labels": [-100] * len(ctx) + cont})
    order = sorted(range(len(seqs)), key=lambda k: -len(seqs[k]["input_ids"]))   # longest first: less padding
    collate = PadCollator(pad_id)
    out = [0.0] * len(seqs)
    for s in range(0, len(order), batch_size):
        idx = order[s:s + batch_size]
        batch = collate([seqs[k] for k in idx])
        logits = model(input_ids=batch["input_ids"].to(device),
                       attention_mask=batch["attention_mask"].to(device)).logits.float()
        logp = F.log_softmax(logits[:, :-1], dim=-1)
        labels = batch["labels"][:, 1:].to(device)
        mask = labels != -100
        tok = logp.gather(-1, labels.clamp(min=0).unsqueeze(-1)).squeeze(-1)
        for k, v in zip(idx, (tok * mask).sum(1).tolist()):
            out[k] = v
    return out


@torch.no_grad()
def _score_shared(model, pad_id: int, encoded: list[tuple[list[int], list[list[int]]]], batch_size: int,
                  device, one_pass: bool = True) -> list[list[float]]:
    """Each prompt once, then every choice of it on the prompt's key/value cache; a batch whose choices are all
    one token long is scored from the prompt pass alone (the second pass would add only zeros; `one_pass=False`
    runs it anyway, the reference the tests compare against)."""
    from transformers import DynamicCache

    scores: list[list[float]] = [[] for _ in encoded]
    order = sorted(range(len(encoded)), key=lambda i: -len(encoded[i][0]))
    for s in range(0, len(order), batch_size):
        idx = order[s:s + batch_size]
        ctxs = [encoded[i][0] for i in idx]
        width = max(len(c) for c in ctxs)
        ids = torch.full((len(idx), width), pad_id, dtype=torch.long)
        mask = torch.zeros((len(idx), width), dtype=torch.long)
        for r, c in enumerate(ctxs):                      # left padding: every prompt ends at the last column
            ids[r, width - len(c):] = torch.tensor(c)
            mask[r, width - len(c):] = 1
        ids, mask = ids.to(device), mask.to(device)
        pos = (mask.cumsum(1) - 1).clamp(min=0)
        owners = [r for r, i in enumerate(idx) for _ in encoded[i][1]]
        conts = [c for i in idx for c in encoded[i][1]]
        longest = max(len(c) for c in conts)
        own = torch.tensor(owners, device=device)
        alone = longest == 1 and one_pass          # every choice is one token: the prompt pass scores them all
        out = model(input_ids=ids, attention_mask=mask, position_ids=pos,
                    **({"use_cache": False} if alone else {"past_key_values": DynamicCache(), "use_cache": True}))
        first = F.log_softmax(out.logits[:, -1].float(), dim=-1)          # predicts every choice's first token
        if alone:
            total = first[own].gather(-1, torch.tensor(conts, device=device)).squeeze(-1)
            _spread(scores, idx, encoded, total)
            continue
        cache = out.past_key_values
        cache.batch_select_indices(torch.tensor(owners, device=device))
        cids = torch.full((len(conts), longest), pad_id, dtype=torch.long)
        cmask = torch.zeros((len(conts), longest), dtype=torch.long)
        for r, c in enumerate(conts):
            cids[r, :len(c)] = torch.tensor(c)
            cmask[r, :len(c)] = 1
        cids, cmask = cids.to(device), cmask.to(device)
        lengths = mask.sum(1)[own]
        cpos = lengths[:, None] + torch.arange(longest, device=device)[None, :]
        logits = model(input_ids=cids, attention_mask=torch.cat([mask[own], cmask], 1), position_ids=cpos,
                       past_key_values=cache, use_cache=True).logits.float()
        logp = F.log_softmax(logits[:, :-1], dim=-1)                      # position t predicts token t+1
        nxt = logp.gather(-1, cids[:, 1:].unsqueeze(-1)).squeeze(-1) * cmask[:, 1:]
        total = first[own].gather(-1, cids[:, :1]).squeeze(-1) + nxt.sum(1)
        _spread(scores, idx, encoded, total)
    return scores


def _spread(scores: list[list[float]], idx: list[int], encoded, total: torch.Tensor) -> None:
    """Hand each prompt of the batch `idx` its choices' scores from the flat `total` (prompt-major)."""
    k = 0
    for i in idx:
        n = len(encoded[i][1])
        scores[i] = total[k:k + n].tolist()
        k += n


@torch.no_grad()
def choice_loglikelihoods(model, tokenizer, examples: list[Example], max_length: int = 128,
                          batch_size: int = 64, shared: bool = True) -> list[list[float]]:
    """For each example, the summed log-probability of every choice's tokens after the prompt."""
    device = next(model.parameters()).device
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    encoded = _encode(tokenizer, examples)
    shared = shared and getattr(model, "key_value_cache", True)   # e.g. proxy tuning: no cache to share
    # prompts that would be truncated (prompt + a choice longer than max_length) are scored pair by pair,
    # with the per-pair truncation the reference applies
    fits = [shared and len(ctx) + max(len(c) for c in conts) <= max_length and min(len(c) for c in conts) > 0
            for ctx, conts in encoded]
    with eval_mode(model):
        scores: list[list[float]] = [[] for _ in examples]
        fit_idx = [i for i, ok in enumerate(fits) if ok]
        if fit_idx:
            per_prompt = max(1, batch_size // max(len(examples[i].choices) for i in fit_idx))
            for i, sc in zip(fit_idx, _score_shared(model, pad_id, [encoded[i] for i in fit_idx], per_prompt, device)):
                scores[i] = sc
        rest = [i for i, ok in enumerate(fits) if not ok]
        pairs = [(encoded[i][0], c) for i in rest for c in encoded[i][1]]
        flat = _score_pairs(model, pad_id, pairs, max_length, batch_size, device) if pairs else []
        k = 0
        for i in rest:
            n = len(encoded[i][1])
            scores[i] = flat[k:k + n]
            k += n
    return scores


def mc_predictions(model, tokenizer, examples: list[Example], length_normalized: bool = False,
                   max_length: int = 128, batch_size: int = 64, shared: bool = True) -> list[int]:
    """The index of the choice the model scores highest (log-likelihood, per token when length_normalized),
    per example."""
    scores = choice_loglikelihoods(model, tokenizer, examples, max_length, batch_size, shared)
    out = []
    for ex, sc in zip(examples, scores):
        if length_normalized:
            sc = [v / max(1, len(c)) for v, c in zip(sc, ex.choices)]
        out.append(max(range(len(sc)), key=lambda j: sc[j]))
    return out


def accuracy_of(examples: list[Example], predicted: list[int]) -> float:
    """The share of the examples whose predicted choice is the labelled one."""
    return sum(int(p == ex.label) for ex, p in zip(examples, predicted)) / len(examples)


def top_answer_share(examples: list[Example], predicted: list[int]) -> float:
    """The share of the examples whose predicted answer (as text) is the model's most frequent one: 1.0 is a
    model giving one constant answer (a yes/no task answered "yes" throughout)."""
    counts = Counter(ex.choices[p] for ex, p in zip(examples, predicted))
    return max(counts.values()) / len(predicted) if predicted else float("nan")


def mc_accuracy(model, tokenizer, examples: list[Example], length_normalized: bool = False,
                max_length: int = 128, batch_size: int = 64, shared: bool = True) -> float:
    if not examples:
        return float("nan")
    predicted = mc_predictions(model, tokenizer, examples, length_normalized, max_length, batch_size, shared)
    return accuracy_of(examples, predicted)
