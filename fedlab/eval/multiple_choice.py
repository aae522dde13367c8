"""Multiple-choice accuracy by the summed log-likelihood of each choice given the prompt (lm-eval style),
and its length-normalised variant (log-likelihood divided by the choice's length in characters)."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from fedlab.data.collate import PadCollator, continuation_ids
from fedlab.data.tasks import Example


@torch.no_grad()
def choice_loglikelihoods(model, tokenizer, examples: list[Example], max_length: int = 128,
                          batch_size: int = 64) -> list[list[float]]:
    """For each example, the summed log-probability of every choice's tokens after the prompt."""
    device = next(model.parameters()).device
    items, owners = [], []
    for i, ex in enumerate(examples):
        for j, choice in enumerate(ex.choices):
            ctx, cont = continuation_ids(tokenizer, ex.prompt, " " + choice)
            ctx = ctx[-(max_length - len(cont)):]
            items.append({"input_ids": ctx + cont, "labels": [-100] * len(ctx) + cont})
            owners.append((i, j))
    # longest first keeps padding low
    order = sorted(range(len(items)), key=lambda k: -len(items[k]["input_ids"]))
    collate = PadCollator(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0)
    scores = [[0.0] * len(ex.choices) for ex in examples]
    was_training = model.training
    model.eval()
    for s in range(0, len(order), batch_size):
        idx = order[s:s + batch_size]
        batch = collate([items[k] for k in idx])
        logits = model(input_ids=batch["input_ids"].to(device),
                       attention_mask=batch["attention_mask"].to(device)).logits.float()
        logp = F.log_softmax(logits[:, :-1], dim=-1)
        labels = batch["labels"][:, 1:].to(device)
        mask = labels != -100
        tok = logp.gather(-1, labels.clamp(min=0).unsqueeze(-1)).squeeze(-1)
        ll = (tok * mask).sum(1).tolist()
        for k, v in zip(idx, ll):
            i, j = owners[k]
            scores[i][j] = v
    model.train(was_training)
    return scores


def mc_accuracy(model, tokenizer, examples: list[Example], length_normalized: bool = False,
                max_length: int = 128, batch_size: int = 64) -> float:
    if not examples:
        return float("nan")
    scores = choice_loglikelihoods(model, tokenizer, examples, max_length, batch_size)
    correct = 0
    for ex, sc in zip(examples, scores):
        if length_normalized:
            sc = [v / max(1, len(c)) for v, c in zip(sc, ex.choices)]
        correct += int(max(range(len(sc)), key=lambda j: sc[j]) == ex.label)
    return correct / len(examples)
