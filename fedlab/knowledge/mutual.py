"""Mutual learning between two models that may tokenize differently (Co-PLMs' SAML,
fedlab/methods/coplms/README.md (CP-5) – (CP-9)): both see the same examples, each in its own tokens; the
logit positions that predict the same next token are paired by FedMKT's alignment
(fedlab/methods/fedmkt/README.md (FM-5)); on every mini-batch each model steps on

    L_a = w_a·L_kt(b → a) + (1 − w_a)·CE_a,      L_b = w_b·L_kt(a → b) + (1 − w_b)·CE_b,

where L_kt(t → s) = mean over the batch's paired positions of KL(pooled_t ‖ pooled_s) (top-K pooling,
`mapped_pooled_kl`) against the other model's detached logits — per token, the normalisation of the CE it is
mixed with (README (CP-6)); `kt_reduction="sum"` (the ablation, the paper's Eq. 7 sum) sums over the
positions and divides by the batch's examples B. Two optimisers, one per model (manual optimisation), so each
model's step and gradient clipping depend on its own loss only."""
from __future__ import annotations

import lightning as L
import torch

from fedlab.align import align_sequences, next_token_pairs
from fedlab.data.collate import PadCollator, encode_example
from fedlab.objectives.pooling import mapped_pooled_kl
from fedlab.objectives.server_fit import fit_shuffled
from fedlab.objectives.terms import target_cross_entropy
from fedlab.seeding import seed_everything


def answer_pairs(item_a: dict, item_b: dict, tokens_a: list[str] | None, tokens_b: list[str] | None,
                 eos: tuple[int | None, int | None] = (None, None)) -> list[tuple[int, int]]:
    """(position in a, position in b) of the logits that predict the same answer token: with token strings
    given, the next-token pairing (FM-5) of the two tokenizations (the end of the answer pairs when both end
    with their EOS); with `tokens_a = tokens_b = None` the two share a tokenizer and position i pairs with
    i. Only positions whose next token is an answer token on both sides."""
    la, lb = item_a["labels"], item_b["labels"]
    if tokens_a is None:
        pairs = [(i, i) for i in range(len(la) - 1)]
    else:
        ids_a, ids_b = item_a["input_ids"], item_b["input_ids"]
        both_end = (eos[0] is not None and eos[1] is not None and ids_a[-1] == eos[0] and ids_b[-1] == eos[1])
        pairs = next_token_pairs(align_sequences(tokens_a, tokens_b),
                                 (len(ids_a), len(ids_b)) if both_end else None)
    return [(i, j) for i, j in pairs
            if i + 1 < len(la) and j + 1 < len(lb) and la[i + 1] != -100 and lb[j + 1] != -100]


def paired_items(examples, tok_a, tok_b, max_length: int, same_tokenizer: bool = False) -> list[dict]:
    """Each example in both tokenizations with its paired positions."""
    out = []
    for e in examples:
        a, b = encode_example(tok_a, e, max_length), encode_example(tok_b, e, max_length)
        if same_tokenizer:
            pairs = answer_pairs(a, b, None, None)
        else:
            pairs = answer_pairs(a, b, tok_a.convert_ids_to_tokens(a["input_ids"]),
                                 tok_b.convert_ids_to_tokens(b["input_ids"]),
                                 (tok_a.eos_token_id, tok_b.eos_token_id))
        out.append({"a": a, "b": b, "pairs": pairs})
    return out


class PairCollator:
    """Pads each side with its own pad id; `pairs` [P, 3] = (row, position in a, position in b)."""

    def __init__(self, pad_a: int, pad_b: int):
        self.a, self.b = PadCollator(pad_a), PadCollator(pad_b)

    def __call__(self, items):
        rows = [(r, i, j) for r, it in enumerate(items) for i, j in it["pairs"]]
        pairs = torch.tensor(rows, dtype=torch.long).reshape(-1, 3)
        return {"a": self.a([it["a"] for it in items]), "b": self.b([it["b"] for it in items]), "pairs": pairs,
                "size": torch.tensor(len(items))}


class MutualModule(L.LightningModule):
    """Two models trained side by side on the paired batches (see the module docstring)."""

    def __init__(self, model_a, keys_a, model_b, keys_b, *, w_a: float, w_b: float, k: int,
                 vmap_ba=None, vmap_ab=None, pool_index: str = "teacher", lr_a: float = 1e-3,
                 lr_b: float = 1e-3, weight_decay: float = 0.0, betas=(0.9, 0.999),
                 train_a: bool = True, train_b: bool = True, kt_reduction: str = "mean"):
        super().__init__()
        self.automatic_optimization = False
        self.model_a, self.model_b = model_a, model_b
        self.keys_a, self.keys_b = tuple(keys_a), tuple(keys_b)
        self.w_a, self.w_b, self.k, self.pool_index = w_a, w_b, k, pool_index
        self.vmap_ba = None if vmap_ba is None else torch.as_tensor(vmap_ba, dtype=torch.long)
        self.vmap_ab = None if vmap_ab is None else torch.as_tensor(vmap_ab, dtype=torch.long)
        self.lr_a, self.lr_b, self.weight_decay, self.betas = lr_a, lr_b, weight_decay, tuple(betas)
        self.train_a, self.train_b = train_a, train_b
        if kt_reduction not in ("mean", "sum"):
            raise ValueError(f"kt_reduction: {kt_reduction!r} is not allowed; allowed: mean, sum")
        self.kt_reduction = kt_reduction

    def losses(self, batch) -> dict:
        """Both objectives of one batch (each model's KL term against the other's detached logits)."""
        a, b, p = batch["a"], batch["b"], batch["pairs"]
        size = float(batch["size"])
        out_a = self.model_a(input_ids=a["input_ids"], attention_mask=a["attention_mask"]).logits
        out_b = self.model_b(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).logits
        za, zb = out_a[p[:, 0], p[:, 1]], out_b[p[:, 0], p[:, 2]]           # [P, V_a], [P, V_b]
        vba = None if self.vmap_ba is None else self.vmap_ba.to(za.device)
        vab = None if self.vmap_ab is None else self.vmap_ab.to(za.device)
        # per paired token (default) or summed per example (ablation): the divisor of the positions' KL sum
        div = max(float(p.shape[0]), 1.0) if self.kt_reduction == "mean" else size
        kt_a = mapped_pooled_kl(zb.detach(), za, self.k, vba, self.pool_index).sum() / div
        kt_b = mapped_pooled_kl(za.detach(), zb, self.k, vab, self.pool_index).sum() / div
        ce_a, ce_b = target_cross_entropy(out_a, a["labels"]), target_cross_entropy(out_b, b["labels"])
        return {"a": self.w_a * kt_a + (1 - self.w_a) * ce_a, "b": self.w_b * kt_b + (1 - self.w_b) * ce_b,
                "kt_a": kt_a, "kt_b": kt_b, "ce_a": ce_a, "ce_b": ce_b,
                "paired": torch.tensor(float(p.shape[0]) / size, device=out_a.device)}   # synced on nccl too

    def training_step(self, batch, batch_idx):
        opts = self.optimizers()
        opts = opts if isinstance(opts, list) else [opts]
        parts = self.losses(batch)
        sides = [s for s, on in (("a", self.train_a), ("b", self.train_b)) if on]
        for opt in opts[: len(sides)]:
            opt.zero_grad()
        total = sum(parts[s] for s in sides)   # the two losses share no trainable parameter
        self.manual_backward(total)
        for opt in opts[: len(sides)]:
            self.clip_gradients(opt, gradient_clip_val=1.0, gradient_clip_algorithm="norm")
            opt.step()
        bs = int(batch["size"])
        for name, value in parts.items():
            self.log(f"loss/{name}", value.detach(), on_step=False, on_epoch=True, batch_size=bs, sync_dist=True)

    def configure_optimizers(self):
        opts = []
        for on, model, keys, lr in ((self.train_a, self.model_a, self.keys_a, self.lr_a),
                                    (self.train_b, self.model_b, self.keys_b, self.lr_b)):
            if on:
                params = dict(model.named_parameters())
                opts.append(torch.optim.AdamW([params[k] for k in keys], lr=lr, weight_decay=self.weight_decay,
                                              betas=self.betas))
        return opts


def named_losses(out: dict, a: str, b: str, prefix: str) -> dict:
    """`train_mutual`'s logged losses under the two models' names: loss/a → <prefix>a, loss/kt_b →
    <prefix>kt_<b>, loss/paired → <prefix>paired, …"""
    names = {"a": a, "b": b, "kt_a": f"kt_{a}", "kt_b": f"kt_{b}", "ce_a": f"ce_{a}", "ce_b": f"ce_{b}"}
    return {prefix + names.get(k.split("/", 1)[1], k.split("/", 1)[1]): v for k, v in out.items()}


def train_mutual(cfg, module: MutualModule, items: list[dict], pad_ids: tuple[int, int], epochs: int,
                 seed: int, server: bool = False) -> dict:
    """Fit a MutualModule on the paired items; returns the epoch means of its logged losses. `server`: the fit
    may run data-parallel over backend.server_devices."""
    seed_everything(seed)
    module.model_a.train()
    module.model_b.train()
    out = fit_shuffled(cfg, module, items, PairCollator(*pad_ids), epochs=epochs, seed=seed,
                       devices=cfg.backend.server_devices if server else 1, manual_optimization=True)
    module.model_a.eval()
    module.model_b.eval()
    return out
