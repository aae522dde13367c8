"""Co-PLMs' device (paper 004, Algorithm 1; fedlab/methods/coplms/README.md (CP-4) – (CP-9)): the DPM (LLM
tokenizer, domain adapters, LoRA) beside the device's own SLM (its own architecture and tokenizer, LoRA).
Each round:

    DST    the adapters train on CE (the DPM's LoRA frozen at the received global state);
    SAML   the DPM's LoRA and the SLM's LoRA train together (adapters frozen), each on
           w·L_kt(other → self) + (1 − w)·CE against the other's detached logits (w = α for the DPM, β for
           the SLM), positions paired across the two tokenizers;
    up     the DPM's LoRA only. The adapters and the SLM's LoRA never leave the device.
"""
from __future__ import annotations

import time
from contextlib import contextmanager

import torch
from torch.utils.data import DataLoader

from fedlab.align import cached_vocab_map
from fedlab.comm.messages import FitRes
from fedlab.data.collate import PadCollator, TokenizedExamples
from fedlab.knowledge.mutual import MutualModule, named_losses, paired_items, train_mutual
from fedlab.methods.client import LoraClient
from fedlab.methods.coplms.upload import dpm_lora_settings
from fedlab.objectives.modules import ClientModule, fit_metrics
from fedlab.objectives.training import make_trainer, optimizer_args
from fedlab.runtime.resident import get_resident
from fedlab.seeding import derive_seed, seed_everything
from fedlab.transforms import get_state, set_state, transform

ADAPTERS, SLM = "adapters/", "slm/"


def dpm_lora(cfg) -> tuple:
    """The DPM's LoRA: rank `method.dpm_lora_r` with α scaled to keep model.lora's α/r (() : model.lora as is)."""
    r, alpha = dpm_lora_settings(cfg)
    return () if r == cfg.model.lora.r else (transform("lora", r=r, alpha=alpha),)


def dpm_chain(cfg) -> tuple:
    """The device's DPM: domain adapters on every block's output when DST is on, then the DPM's LoRA."""
    adapters = (transform("adapters", width=cfg.method.adapter_width, where="block"),) if cfg.method.dst else ()
    return adapters + dpm_lora(cfg)


def domain_tuning(cfg, dpm, dataset, seed: int) -> dict:
    """DST (paper Eq. 5, README (CP-4)): the DPM's domain adapters train on the task CE over `dataset`,
    everything else frozen (the LoRA stays at the state set before). Used by the devices on their data and by
    the server on D^s."""
    seed_everything(seed)
    loader = DataLoader(dataset, batch_size=cfg.federation.batch_size, shuffle=True,
                        generator=torch.Generator().manual_seed(seed), collate_fn=PadCollator(dpm.tokenizer.pad_token_id))
    keys = dpm.keys["adapters"]
    module = ClientModule(dpm.model, keys, **optimizer_args(cfg))
    with requires_grad_only(dpm.model, keys):
        dpm.model.train()
        make_trainer(cfg, max_epochs=cfg.method.dst_epochs).fit(module, loader)
        dpm.model.eval()
    return {f"dst/{k.split('/', 1)[1]}": float(v) for k, v in fit_metrics(module).items()}


@contextmanager
def requires_grad_only(model, keys):
    """Within the block, exactly the parameters named in `keys` require gradients."""
    params = dict(model.named_parameters())
    before = {k: p.requires_grad for k, p in params.items()}
    wanted = set(keys)
    for k, p in params.items():
        p.requires_grad_(k in wanted)
    try:
        yield
    finally:
        for k, p in params.items():
            p.requires_grad_(before[k])


class CoPLMsClient(LoraClient):
    """`own_state` holds what stays on the device: the adapters (`adapters/<name>`) and the SLM's LoRA
    (`slm/<name>`)."""

    def dpm(self, ins):
        return get_resident(self.cfg, ins.config["dpm"], None, dpm_chain(self.cfg))

    def slm(self):
        return self.host.resident_for(self.cid)

    def _own(self, prefix: str) -> dict:
        return {k[len(prefix):]: v for k, v in (self.own_state or {}).items() if k.startswith(prefix)}

    def start_state(self, ins) -> dict:
        """Evaluation scores the SLM with its own LoRA."""
        return self._own(SLM) or self.slm().init_state

    def fit(self, ins):
        m = self.cfg.method
        t0 = time.perf_counter()
        dpm, slm = self.dpm(ins), self.slm()
        set_state(dpm.model, ins.state)
        adapters = self._own(ADAPTERS) or dpm.initial.get("adapters", {})
        set_state(dpm.model, adapters)
        set_state(slm.model, self._own(SLM) or slm.init_state)
        examples = list(self.host.data.train[self.cid])
        metrics: dict = {}
        if m.dst:
            metrics.update(self.domain_tuning(ins, dpm, examples))
        metrics.update(self.mutual_learning(ins, dpm, slm, examples))
        own = {ADAPTERS + k: v for k, v in get_state(dpm.model, dpm.keys.get("adapters", ())).items()}
        own.update({SLM + k: v for k, v in get_state(slm.model, slm.spec.communicated).items()})
        self.own_state = own
        metrics["time/fit"] = time.perf_counter() - t0
        return FitRes(self.cid, ins.round, get_state(dpm.model, dpm.spec.communicated), len(examples), metrics)

    def domain_tuning(self, ins, dpm, examples) -> dict:
        """DST: only the adapters train, on the task CE."""
        seed = derive_seed(self.cfg.seed, "coplms-dst", ins.round, self.cid)
        return domain_tuning(self.cfg, dpm, self._tokenized(("dst", dpm.name), dpm.tokenizer, examples), seed)

    def mutual_learning(self, ins, dpm, slm, examples) -> dict:
        """SAML on the device: DPM (a) and SLM (b), LoRA of both, adapters frozen."""
        m = self.cfg.method
        key = ("saml", dpm.name, slm.name)
        if key not in self._datasets:
            self._datasets[key] = paired_items(examples, dpm.tokenizer, slm.tokenizer, self.cfg.model.max_length)
        items = self._datasets[key]
        vmaps = self.host.shared.setdefault(("coplms-vmaps", dpm.name, slm.name), (
            cached_vocab_map(slm.tokenizer, dpm.tokenizer), cached_vocab_map(dpm.tokenizer, slm.tokenizer)))
        opt = optimizer_args(self.cfg)
        module = MutualModule(dpm.model, dpm.spec.trainable, slm.model, slm.spec.trainable, w_a=m.alpha, w_b=m.beta,
                              k=m.topk, vmap_ba=vmaps[0], vmap_ab=vmaps[1], pool_index=m.pool_index, kt_reduction=m.kt_reduction,
                              lr_a=opt["lr"], lr_b=opt["lr"], weight_decay=opt["weight_decay"], betas=opt["betas"])
        seed = derive_seed(self.cfg.seed, "coplms-saml", ins.round, self.cid)
        with requires_grad_only(dpm.model, dpm.spec.trainable):
            out = train_mutual(self.cfg, module, items, (dpm.tokenizer.pad_token_id, slm.tokenizer.pad_token_id),
                               m.saml_epochs, seed)
        metrics = named_losses(out, "dpm", "slm", "saml/")
        metrics["loss/task"] = out.get("loss/ce_b", float("nan"))   # the SLM's CE: the progress line's task loss
        return metrics

    def _tokenized(self, key, tokenizer, examples):
        if key not in self._datasets:
            self._datasets[key] = TokenizedExamples(tokenizer, examples, self.cfg.model.max_length)
        return self._datasets[key]
