"""Knowledge transfer on a public set, for every method that distils between models of different
tokenizers (FedMKT, Co-PLMs, Floe): the public set tokenised once per tokenizer, a model's knowledge on it
(per-sample loss + top-K logits per position), and a teacher's knowledge turned into sparse distillation
examples for a student of another tokenizer."""
from __future__ import annotations

import torch

from fedlab.align import align_sequences, next_token_pairs, translate_topk
from fedlab.comm.knowledge import pack_knowledge, sample_topk
from fedlab.data.collate import PadCollator, encode_example
from fedlab.models.modes import eval_mode
from fedlab.objectives.terms import per_sample_target_nll


class PublicSet:
    """The public examples as one tokenizer sees them: model inputs and the token strings (for alignment)."""

    def __init__(self, tokenizer, examples, max_length: int):
        self.items = [encode_example(tokenizer, e, max_length) for e in examples]
        self.tokens = [tokenizer.convert_ids_to_tokens(it["input_ids"]) for it in self.items]
        self.pad_id = tokenizer.pad_token_id
        # whether a sample ends with the tokenizer's EOS (generative answers, not cut by max_length)
        eos = tokenizer.eos_token_id
        self.ends = [eos is not None and bool(it["input_ids"]) and it["input_ids"][-1] == eos for it in self.items]
        self.tasks = [e.task for e in examples]

    def __len__(self):
        return len(self.items)

    def batches(self, batch_size: int, device):
        collate = PadCollator(self.pad_id)
        for start in range(0, len(self.items), batch_size):
            batch = collate(self.items[start:start + batch_size])
            yield start, {k: v.to(device) for k, v in batch.items()}


@torch.no_grad()
def public_knowledge(model, public: PublicSet, k: int, batch_size: int = 32,
                     logit_dtype: torch.dtype = torch.float32) -> dict:
    """FedMKT's knowledge (Algorithm 1 lines 17 and 27; fedlab/methods/fedmkt/README.md (FM-2)): per public
    sample l^i = −log p(answer | prompt), the NLL *summed* over the answer's tokens (it does not depend on how
    a tokenizer cuts the answer; a per-token mean favours finer tokenizers), and the top-K (id, logit) at
    every position that has a next token. k = 0: the losses only."""
    device = next(model.parameters()).device
    losses, ids, logits = [], [], []
    with eval_mode(model):
        for _, batch in public.batches(batch_size, device):
            out = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
            losses.append(per_sample_target_nll(out, batch["labels"]).cpu())
            if k:
                lengths = batch["attention_mask"].sum(1).tolist()
                top = out.float().topk(k, dim=-1)
                for b, n in enumerate(lengths):
                    ids.append(top.indices[b, : n - 1].cpu())
                    logits.append(top.values[b, : n - 1].cpu())
    loss = torch.cat(losses) if losses else torch.zeros(0)
    if not k:
        return {"loss": loss}
    return pack_knowledge(loss, ids, logits, logit_dtype)


def student_next(item: dict, kd_positions: str) -> torch.Tensor:
    """The student's ground-truth next token per position (−100 where no distillation target is wanted)."""
    ids = torch.tensor(item["input_ids"])
    nxt = torch.full_like(ids, -100)
    nxt[:-1] = ids[1:]
    if kd_positions == "target":
        labels = torch.tensor(item["labels"])
        nxt[:-1] = torch.where(labels[1:] != -100, nxt[:-1], torch.full_like(nxt[:-1], -100))
    return nxt


class Aligner:
    """Alignment of public samples between a teacher's and a student's tokenizer, memoised per
    (teacher, sample): the public set does not change between rounds."""

    def __init__(self, student: PublicSet):
        self.student = student
        self._pairs: dict[tuple, list] = {}

    def pairs(self, teacher_key, teacher: PublicSet, i: int) -> list[tuple[int, int]]:
        """(teacher position, student position) whose logits predict the same next token
        (fedlab/methods/fedmkt/README.md (FM-5)): the tokens matched by `align_sequences` shifted by one, and
        the last positions when both samples end with their EOS (both then predict the end of the answer)."""
        key = (teacher_key, i)
        if key not in self._pairs:
            s_tokens = self.student.tokens[i]
            both_end = teacher.ends[i] and self.student.ends[i]
            self._pairs[key] = next_token_pairs(align_sequences(teacher.tokens[i], s_tokens),
                                                (len(teacher.tokens[i]), len(s_tokens)) if both_end else None)
        return self._pairs[key]

    def matched_fraction(self, teacher_key) -> float:
        """The share of the student's positions with a next token that pair with a teacher position."""
        done = [(len(p), len(self.student.tokens[i]) - 1) for (t, i), p in self._pairs.items() if t == teacher_key]
        return sum(a for a, _ in done) / max(1, sum(b for _, b in done))


def distill_items(aligner: Aligner, teachers: dict[int, tuple], vmaps: dict, temperature: float,
                  kd_positions: str, k: int) -> list[dict]:
    """Training items for the student, one per public sample, in order: L_FT covers every sample
    (fedlab/methods/fedmkt/README.md (FM-7)); a selected sample i carries sparse soft targets from the teacher
    chosen for it, `teachers[i]` = (teacher key, the teacher's PublicSet, its knowledge), with `vmaps[teacher
    key]` mapping teacher ids to student ids; the others carry none (kd_mask all False, so only the task loss
    trains on them)."""
    items = []
    for i, item in enumerate(aligner.student.items):
        if i in teachers:
            key, teacher, knowledge = teachers[i]
            t_ids, t_logits = sample_topk(knowledge, i)
            kd_ids, kd_probs, kd_mask = translate_topk(aligner.pairs(key, teacher, i), t_ids, t_logits,
                                                       student_next(item, kd_positions), vmaps[key], temperature)
        else:
            n = len(item["input_ids"])
            kd_ids, kd_probs, kd_mask = torch.zeros(n, k, dtype=torch.long), torch.zeros(n, k), torch.zeros(n, dtype=torch.bool)
        items.append({**item, "kd_ids": kd_ids, "kd_probs": kd_probs, "kd_mask": kd_mask})
    return items


def kept_by_task(public: PublicSet, keep) -> dict[str, float]:
    """Per task, the share of its public samples selected (where the other side's knowledge won)."""
    out: dict[str, list] = {}
    for t, kept in zip(public.tasks, [bool(x) for x in keep]):
        out.setdefault(t, []).append(kept)
    return {t: sum(v) / len(v) for t, v in out.items()}


class DistillCollator(PadCollator):
    """PadCollator plus the sparse targets: kd_ids/kd_probs [B, S, K] padded with zeros, kd_mask [B, S]."""

    def __call__(self, items):
        batch = super().__call__(items)
        b, n = batch["input_ids"].shape
        k = items[0]["kd_ids"].shape[1]
        ids = torch.zeros(b, n, k, dtype=torch.long)
        probs = torch.zeros(b, n, k)
        mask = torch.zeros(b, n, dtype=torch.bool)
        for r, it in enumerate(items):
            m = it["kd_ids"].shape[0]
            ids[r, :m], probs[r, :m], mask[r, :m] = it["kd_ids"], it["kd_probs"], it["kd_mask"]
        return {**batch, "kd_ids": ids, "kd_probs": probs, "kd_mask": mask}
