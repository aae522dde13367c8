"""Generative evaluation: greedy decoding, Rouge-L (torchmetrics) and exact match."""
from __future__ import annotations

import string

import torch
from torchmetrics.text.rouge import ROUGEScore

from fedlab.data.tasks import Example
from fedlab.models.modes import eval_mode


def normalize(text: str) -> str:
    """What Rouge-L is computed on: lower case, a trailing period dropped, whitespace collapsed (torchmetrics'
    Rouge tokenizer then splits on anything that is not a letter or digit, as rouge_score's does)."""
    return " ".join(text.lower().strip().rstrip(".").split())


def normalize_answer(text: str) -> str:
    """SNI's exact-match normalisation (natural-instructions' `normalize_answer`): lower case, every
    ASCII punctuation character removed, whitespace collapsed — "Delhi, likes rice." equals "delhi likes rice"."""
    return " ".join(text.lower().translate(_NO_PUNCTUATION).split())


_NO_PUNCTUATION = str.maketrans("", "", string.punctuation)


@torch.no_grad()
def greedy_generate(model, tokenizer, prompts: list[str], max_new_tokens: int = 24, batch_size: int = 32) -> list[str]:
    """Greedy continuations of the prompts, `batch_size` at a time: prompts left-padded (with the attention
    mask and positions that skip the padding), each continuation cut at its first EOS. batch_size=1 decodes
    one prompt at a time (the reference the batched path is tested against)."""
    device = next(model.parameters()).device
    with eval_mode(model):
        return _greedy(model, tokenizer, prompts, max_new_tokens, batch_size, device)


def _greedy(model, tokenizer, prompts, max_new_tokens, batch_size, device) -> list[str]:
    outs: list[str] = []
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    if not hasattr(model, "generate"):      # a logits-only composite (proxy tuning): one prompt at a time
        return [_greedy_logits_only(model, tokenizer, p, max_new_tokens, device) for p in prompts]
    for start in range(0, len(prompts), batch_size):
        encoded = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts[start:start + batch_size]]
        width = max(len(e) for e in encoded)
        ids = torch.full((len(encoded), width), pad, dtype=torch.long)
        mask = torch.zeros((len(encoded), width), dtype=torch.long)
        for r, e in enumerate(encoded):
            ids[r, width - len(e):] = torch.tensor(e)
            mask[r, width - len(e):] = 1
        gen = model.generate(input_ids=ids.to(device), attention_mask=mask.to(device), max_new_tokens=max_new_tokens,
                             do_sample=False, pad_token_id=pad, eos_token_id=tokenizer.eos_token_id)
        for row in gen[:, width:].tolist():
            if tokenizer.eos_token_id in row:
                row = row[:row.index(tokenizer.eos_token_id)]
            outs.append(tokenizer.decode(row, skip_special_tokens=True).strip())
    return outs


@torch.no_grad()
def _greedy_logits_only(model, tokenizer, prompt: str, max_new_tokens: int, device) -> str:
    """Greedy decoding with a model that only maps input ids to logits (no `generate`, no key/value cache):
    the whole sequence is read again at every step, without padding."""
    ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    new: list[int] = []
    for _ in range(max_new_tokens):
        x = torch.tensor([ids + new], device=device)
        nxt = int(model(input_ids=x, attention_mask=torch.ones_like(x)).logits[0, -1].argmax())
        if nxt == tokenizer.eos_token_id:
            break
        new.append(nxt)
    return tokenizer.decode(new, skip_special_tokens=True).strip()


def rouge_l_and_em(predictions: list[str], references: list[str]) -> tuple[float, float]:
    if not predictions:
        return float("nan"), float("nan")
    rouge = ROUGEScore(rouge_keys=("rougeL",))
    score = rouge([normalize(p) for p in predictions], [normalize(r) for r in references])
    em = sum(normalize_answer(p) == normalize_answer(r) for p, r in zip(predictions, references)) / len(predictions)
    return float(score["rougeL_fmeasure"]), em


def generation_scores(model, tokenizer, examples: list[Example], max_new_tokens: int = 24,
                      batch_size: int = 32) -> dict[str, float]:
    preds = greedy_generate(model, tokenizer, [e.prompt for e in examples], max_new_tokens, batch_size)
    rl, em = rouge_l_and_em(preds, [e.target for e in examples])
    return {"rougeL": rl, "em": em}
