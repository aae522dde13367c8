"""Tokenisation of examples into (input_ids, labels) with the loss on the target tokens only, and padding."""
from __future__ import annotations

import torch
from torch.utils.data import Dataset

from fedlab.data.tasks import Example


def continuation_ids(tokenizer, context: str, continuation: str) -> tuple[list[int], list[int]]:
    """Token ids of `context` and of `continuation` as it is tokenised after the context (lm-eval style:
    encode the whole string and split at the context's length; fall back to separate encoding when the
    tokeniser merges across the boundary)."""
    ctx = tokenizer(context, add_special_tokens=False)["input_ids"]
    whole = tokenizer(context + continuation, add_special_tokens=False)["input_ids"]
    if whole[:len(ctx)] == ctx and len(whole) > len(ctx):
        return ctx, whole[len(ctx):]
    return ctx, tokenizer(continuation, add_special_tokens=False)["input_ids"]


def encode_example(tokenizer, ex: Example, max_length: int, add_eos: bool | None = None) -> dict:
    ctx, cont = continuation_ids(tokenizer, ex.prompt, " " + ex.target)
    if (add_eos if add_eos is not None else not ex.is_choice) and tokenizer.eos_token_id is not None:
        cont = cont + [tokenizer.eos_token_id]
    cont = cont[:max_length - 1]
    ctx = ctx[-(max_length - len(cont)):]
    ids = ctx + cont
    labels = [-100] * len(ctx) + cont
    return {"input_ids": ids, "labels": labels}


class TokenizedExamples(Dataset):
    def __init__(self, tokenizer, examples: list[Example], max_length: int):
        self.items = [encode_example(tokenizer, e, max_length) for e in examples]

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


class PadCollator:
    """Right-pads input_ids with the pad id, labels with -100, and builds the attention mask."""

    def __init__(self, pad_id: int):
        self.pad_id = pad_id

    def __call__(self, items: list[dict]) -> dict:
        n = max(len(it["input_ids"]) for it in items)
        ids = torch.full((len(items), n), self.pad_id, dtype=torch.long)
        labels = torch.full((len(items), n), -100, dtype=torch.long)
        mask = torch.zeros((len(items), n), dtype=torch.long)
        for i, it in enumerate(items):
            m = len(it["input_ids"])
            ids[i, :m] = torch.tensor(it["input_ids"])
            labels[i, :m] = torch.tensor(it["labels"])
            mask[i, :m] = 1
        return {"input_ids": ids, "attention_mask": mask, "labels": labels}
