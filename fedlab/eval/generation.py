"""Generative evaluation: greedy decoding, Rouge-L (torchmetrics) and exact match."""
from __future__ import annotations

import torch
from torchmetrics.text.rouge import ROUGEScore

from fedlab.data.tasks import Example


def normalize(text: str) -> str:
    return " ".join(text.lower().strip().rstrip(".").split())


@torch.no_grad()
def greedy_generate(model, tokenizer, prompts: list[str], max_new_tokens: int = 24) -> list[str]:
    device = next(model.parameters()).device
    outs = []
    was_training = model.training
    model.eval()
    for prompt in prompts:
        ids = torch.tensor([tokenizer(prompt, add_special_tokens=False)["input_ids"]], device=device)
        gen = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new_tokens,
                             do_sample=False, pad_token_id=tokenizer.pad_token_id,
                             eos_token_id=tokenizer.eos_token_id)
        outs.append(tokenizer.decode(gen[0, ids.shape[1]:], skip_special_tokens=True).strip())
    model.train(was_training)
    return outs


def rouge_l_and_em(predictions: list[str], references: list[str]) -> tuple[float, float]:
    if not predictions:
        return float("nan"), float("nan")
    rouge = ROUGEScore(rouge_keys=("rougeL",))
    score = rouge([normalize(p) for p in predictions], [normalize(r) for r in references])
    em = sum(normalize(p) == normalize(r) for p, r in zip(predictions, references)) / len(predictions)
    return float(score["rougeL_fmeasure"]), em


def generation_scores(model, tokenizer, examples: list[Example], max_new_tokens: int = 24) -> dict[str, float]:
    preds = greedy_generate(model, tokenizer, [e.prompt for e in examples], max_new_tokens)
    rl, em = rouge_l_and_em(preds, [e.target for e in examples])
    return {"rougeL": rl, "em": em}
