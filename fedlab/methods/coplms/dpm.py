"""Co-PLMs' distilled proxy model (paper Eq. 4; fedlab/methods/coplms/README.md (CP-1)): a smaller model with
the LLM's tokenizer — FedProxy's block-influence compression of the LLM by default, or a zoo model that shares
the tokenizer — distilled from the LLM on the server's data with token-level reverse KL (MiniLLM's
sequence-level policy-gradient objective simplified to its per-token form; forward KL as an option). The
result is cached as a derived model (`fedlab.models.derived`) under the hash of everything that built it."""
from __future__ import annotations

import hashlib
import sys
import time

import lightning as L
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader

from fedlab.data.collate import PadCollator, encode_example
from fedlab.models import derived
from fedlab.objectives.training import make_trainer
from fedlab.seeding import derive_seed, seed_everything
from fedlab.transforms.compress import decoder_blocks, make_proxy, measure_block_influence, select_blocks
from fedlab.validation import ConfigError


def token_kl(teacher_logits: torch.Tensor, student_logits: torch.Tensor, mask: torch.Tensor,
             direction: str = "reverse") -> torch.Tensor:
    """Mean over the positions in `mask` [B, S] of KL(p_s ‖ p_t) (reverse, MiniLLM's direction: the
    student is pushed onto the teacher's modes) or KL(p_t ‖ p_s) (forward), over the whole vocabulary."""
    log_t = F.log_softmax(teacher_logits.float(), -1)
    log_s = F.log_softmax(student_logits.float(), -1)
    if direction == "reverse":
        kl = (log_s.exp() * (log_s - log_t)).sum(-1)
    elif direction == "forward":
        kl = (log_t.exp() * (log_t - log_s)).sum(-1)
    else:
        raise ValueError(f"direction: {direction!r} is not allowed; allowed: reverse, forward")
    m = mask.float()
    return (kl * m).sum() / m.sum().clamp(min=1.0)


class DistillModule(L.LightningModule):
    """Full-weight distillation of the DPM's blocks (embeddings and head stay the LLM's) from the frozen
    LLM, on every position that has a next token."""

    def __init__(self, student, teacher, direction: str, lr: float):
        super().__init__()
        self.student, self.teacher, self.direction, self.lr = student, teacher, direction, lr
        for p in self.teacher.parameters():
            p.requires_grad_(False)

    def training_step(self, batch, batch_idx):
        with torch.no_grad():
            t = self.teacher(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
        s = self.student(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
        mask = batch["attention_mask"].clone()
        mask[:, -1] = 0
        mask[:, :-1] = mask[:, :-1] * batch["attention_mask"][:, 1:]   # positions with a next token
        loss = token_kl(t, s, mask, self.direction)
        self.log("loss/distill", loss.detach(), on_step=False, on_epoch=True, batch_size=batch["input_ids"].shape[0])
        return loss

    def configure_optimizers(self):
        params = [p for blk in decoder_blocks(self.student) for p in blk.parameters()]
        return torch.optim.AdamW(params, lr=self.lr)


def _data_digest(examples) -> str:
    h = hashlib.sha256()
    for e in examples:
        h.update(f"{e.prompt}\x1f{e.target}\x1e".encode())
    return h.hexdigest()[:16]


def _check_same_tokenizer(llm_name: str, llm_tok, name: str, tok) -> None:
    if llm_tok.get_vocab() != tok.get_vocab():
        raise ConfigError(f"method.dpm_init: {name!r} does not share the LLM's tokenizer ({llm_name}); the DPM "
                          "must (Co-PLMs paper §4.1). Use 'compress' or a model with the same vocabulary")


def build_dpm(cfg, examples, progress: bool = True) -> tuple[str, dict]:
    """The DPM's derived-model name and what built it (kept blocks, block influence, distillation loss);
    built and cached on first use, read from the cache afterwards."""
    from fedlab.models.zoo import load_model, provenance

    m = cfg.method
    llm, tok = load_model(cfg.model.name)
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    info: dict = {}
    if m.dpm_init == "compress":
        batches = _batches(tok, examples, cfg.model.max_length, 32)
        bi = measure_block_influence(llm, batches)
        kept = select_blocks(bi, m.kappa)
        info.update(kept_layers=kept, block_influence=[round(float(x), 6) for x in bi],
                    llm_blocks=len(decoder_blocks(llm)))
        init_source = {"compress": provenance(cfg.model.name), "kept_layers": kept}
    else:
        init_model, init_tok = load_model(m.dpm_init)
        _check_same_tokenizer(cfg.model.name, tok, m.dpm_init, init_tok)
        init_source = {"model": m.dpm_init, **provenance(m.dpm_init)}
    epochs = m.dpm_epochs if m.dpm_distill != "none" else 0
    recipe = {"kind": "coplms-dpm", "llm": {"name": cfg.model.name, **provenance(cfg.model.name)},
              "init": init_source, "distill": m.dpm_distill, "epochs": epochs, "lr": m.dpm_lr,
              "batch_size": cfg.federation.batch_size, "max_length": cfg.model.max_length,
              "data": _data_digest(examples), "seed": cfg.seed}
    name = derived.derived_name(recipe)
    if derived.exists(recipe):
        return name, {**info, **derived.read_derived_meta(name).get("built", {})}
    student = make_proxy(llm, info["kept_layers"]) if m.dpm_init == "compress" else init_model
    t0 = time.perf_counter()
    if epochs:
        if progress:
            print(f"[fedlab] coplms: distilling the DPM ({sum(p.numel() for p in student.parameters()) / 1e6:.2f}M "
                  f"parameters) from {cfg.model.name}, {epochs} epochs of {m.dpm_distill} KL on "
                  f"{len(examples)} samples", file=sys.stderr, flush=True)
        seed = derive_seed(cfg.seed, "coplms-dpm")
        seed_everything(seed)
        items = [encode_example(tok, e, cfg.model.max_length, add_eos=True) for e in examples]
        loader = DataLoader(items, batch_size=cfg.federation.batch_size, shuffle=True,
                            generator=torch.Generator().manual_seed(seed), collate_fn=PadCollator(tok.pad_token_id))
        module = DistillModule(student, llm, m.dpm_distill, m.dpm_lr)
        student.train()
        make_trainer(cfg, max_epochs=epochs).fit(module, loader)
        student.eval()
        info["distill_loss"] = float(module.trainer.callback_metrics.get("loss/distill", float("nan")))
    info["distill_seconds"] = round(time.perf_counter() - t0, 2)
    student.to("cpu")
    name = derived.save_derived(student, tok, recipe, extra={"built": info})
    return name, info


def _batches(tok, examples, max_length: int, batch_size: int):
    collate = PadCollator(tok.pad_token_id)
    items = [encode_example(tok, e, max_length, add_eos=True) for e in examples]
    for i in range(0, len(items), batch_size):
        yield collate(items[i:i + batch_size])
