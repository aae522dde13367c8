"""Co-PLMs (paper 004; its equations: fedlab/methods/coplms/README.md), read top to bottom:

setup        the DPM: the LLM compressed by block influence (or a zoo model with its tokenizer), distilled
             from the LLM on the server's data (reverse KL), cached as a derived model;
round t      down: the global DPM LoRA; each device runs DST then SAML with its own SLM (`client.py`) and
             uploads its DPM LoRA;
server       uniform average of the DPM LoRAs (A and B averaged separately, element-wise), then SAML between
             the DPM and the LLM on the server's data (both LoRAs train; one tokenizer, so positions pair
             one to one) — or, in the ablation w/o SAML, CE LoRA tuning of the LLM alone; the DPM LoRA after
             server SAML is next round's broadcast.
evaluation   each device's SLM (its own LoRA) on its tasks; the LLM and the server's DPM on every task.
"""
from __future__ import annotations

import time

import torch

from fedlab.aggregators import fedavg
from fedlab.comm.messages import EvalIns, FitIns
from fedlab.eval.summary import summarize_eval
from fedlab.eval.tasks import evaluate_server_model
from fedlab.knowledge.mutual import MutualModule, named_losses, paired_items, train_mutual
from fedlab.methods.base import FedMethod
from fedlab.methods.coplms.client import domain_tuning, dpm_chain, requires_grad_only
from fedlab.methods.coplms.dpm import build_dpm
from fedlab.objectives.modules import ServerModule
from fedlab.objectives.server_fit import fit_shuffled
from fedlab.objectives.training import optimizer_args
from fedlab.runtime.resident import get_resident
from fedlab.seeding import derive_seed, seed_everything
from fedlab.transforms.lora import flatten_state, get_state, set_state, unflatten_like


class CoPLMs(FedMethod):
    table_columns = (("final", "llm/", "LLM final (round {round})"), ("final", "dpm/", "DPM (server) final"))
    per_client_metrics = ("loss/task", "time/fit", "saml/kt_dpm", "saml/kt_slm")
    progress_metrics = {"rougeL": "rougeL/mean", "acc": "acc/mean", "llm-rougeL": "llm/rougeL/mean",
                        "task-loss": "loss/task"}
    headline = "rougeL/mean"

    def setup(self) -> None:
        self.dpm_name, self.dpm_info = build_dpm(self.cfg, list(self.data.public))
        self.global_state = {k: v.clone() for k, v in self.server_dpm.init_state.items()}   # the DPM's LoRA
        self.llm_state = {k: v.clone() for k, v in self.llm.init_state.items()}
        self._server_eval: dict | None = None
        self._server_items = None
        self._server_dst_items = None
        self.server_adapters = None      # the server DPM's own domain adapters (DST on D^s), never sent

    @property
    def llm(self):
        return get_resident(self.cfg, self.cfg.model.name)

    @property
    def server_dpm(self):
        # the devices' DPM shape: the domain adapters (the server's own, never sent) when DST is on, then LoRA
        return get_resident(self.cfg, self.dpm_name, None, dpm_chain(self.cfg))

    def _load_server_dpm(self):
        """The server's DPM as it stands: the broadcast LoRA and the server's own adapters."""
        dpm = self.server_dpm
        set_state(dpm.model, self.global_state)
        if self.cfg.method.dst:
            set_state(dpm.model, self.server_adapters or dpm.initial.get("adapters", {}))
        return dpm

    @staticmethod
    def preflight(cfg, data) -> None:
        """The DPM's upload below every device SLM's (`upload.check_upload`), before anything is built."""
        from fedlab.methods.coplms.upload import check_upload

        check_upload(cfg)

    def begin(self, ctx) -> None:
        """Logs what built the DPM and its scores before distillation (`dpm_before/…`); the distilled DPM's
        own are round 0's `dpm/…`."""
        stats = {f"dpm_{k}": v for k, v in self.dpm_info.items() if isinstance(v, (int, float))}
        stats["dpm_parameters"] = sum(p.numel() for p in self.server_dpm.model.parameters() if not p.requires_grad) / 1e6
        ctx.log(stats, prefix="server/")
        before = self.undistilled_dpm()
        if before is not None:
            model, tok = before
            summary = evaluate_server_model(model, tok, self.data, self.cfg)
            ctx.log({k: v for k, v in summary.items() if k.endswith("/mean")}, prefix="dpm_before/")

    def undistilled_dpm(self):
        """The DPM as initialised, before distillation: the compressed LLM or the chosen zoo model."""
        from fedlab.models.zoo import load_model
        from fedlab.transforms.compress import make_proxy

        m = self.cfg.method
        if m.dpm_init == "compress":
            llm, tok = load_model(self.cfg.model.name)
            return make_proxy(llm, self.dpm_info["kept_layers"], copy=False).to(self.llm.device), tok
        model, tok = load_model(m.dpm_init)
        return model.to(self.llm.device), tok

    # ------------------------------------------------------------------ the round
    def run_round(self, rnd, ctx):
        ups = ctx.fit({cid: FitIns(rnd, self.global_state, {"dpm": self.dpm_name}) for cid in ctx.sample()})
        if not ups:
            return
        cids = sorted(ups)
        keys = list(self.global_state)
        stacked = torch.stack([flatten_state(ups[c].state, keys) for c in cids])
        self.global_state = unflatten_like(fedavg(stacked), self.global_state)   # uniform, element-wise
        ctx.log(self.server_learning(rnd), prefix="server/")
        self._server_eval = None

    def server_learning(self, rnd: int) -> dict:
        """Server SAML between the DPM (a) and the LLM (b) on the server's data; w/o SAML the LLM alone
        gets CE LoRA tuning there and the averaged DPM LoRA is broadcast as it is."""
        m = self.cfg.method
        t0 = time.perf_counter()
        dpm, llm = self._load_server_dpm(), self.llm
        set_state(llm.model, self.llm_state)
        lr = m.server_lr or self.cfg.federation.lr
        seed = derive_seed(self.cfg.seed, "coplms-server", rnd)
        examples = list(self.data.public)
        stats = {}
        if m.dst and m.server_saml:
            # the server's DST on D^s before its SAML (README (CP-11)): the DPM that teaches the LLM carries
            # adapters trained for the server's domain, as each device's DPM does for its own
            from fedlab.data.collate import TokenizedExamples

            if self._server_dst_items is None:
                self._server_dst_items = TokenizedExamples(dpm.tokenizer, examples, self.cfg.model.max_length)
            dst = domain_tuning(self.cfg, dpm, self._server_dst_items, derive_seed(self.cfg.seed, "coplms-server-dst", rnd))
            self.server_adapters = get_state(dpm.model, dpm.keys["adapters"])
            stats.update({k.replace('/', '_'): v for k, v in dst.items()})
        if m.server_saml:
            if self._server_items is None:
                self._server_items = paired_items(examples, dpm.tokenizer, llm.tokenizer, self.cfg.model.max_length,
                                                  same_tokenizer=True)
            opt = optimizer_args(self.cfg, lr)
            module = MutualModule(dpm.model, dpm.spec.trainable, llm.model, llm.spec.trainable, w_a=m.alpha,
                                  w_b=m.beta, k=m.topk, pool_index=m.pool_index, kt_reduction=m.kt_reduction,
                                  lr_a=lr, lr_b=lr,
                                  weight_decay=opt["weight_decay"], betas=opt["betas"])
            with requires_grad_only(dpm.model, [*dpm.spec.trainable, *llm.spec.trainable]):   # adapters frozen
                out = train_mutual(self.cfg, module, self._server_items,
                                   (dpm.tokenizer.pad_token_id, llm.tokenizer.pad_token_id), m.server_epochs, seed,
                                   server=True)
            self.global_state = get_state(dpm.model, dpm.spec.communicated)
            stats.update(named_losses(out, "dpm", "llm", "saml_"))
        else:
            from fedlab.data.collate import PadCollator, TokenizedExamples

            seed_everything(seed)
            module = ServerModule(llm.model, llm.spec.trainable, **optimizer_args(self.cfg, lr))
            llm.model.train()
            out = fit_shuffled(self.cfg, module, TokenizedExamples(llm.tokenizer, examples, self.cfg.model.max_length),
                               PadCollator(llm.tokenizer.pad_token_id), epochs=m.server_epochs, seed=seed,
                               devices=self.cfg.backend.server_devices)
            llm.model.eval()
            stats["llm_ce"] = out.get("loss/task", float("nan"))
        self.llm_state = get_state(llm.model, llm.spec.communicated)
        stats["time_server"] = time.perf_counter() - t0
        return stats

    def check_upload(self, res) -> str | None:
        ref = self.global_state
        if res.state is None:
            return "no DPM LoRA in the upload"
        if set(res.state) != set(ref):
            extra = sorted(set(res.state) - set(ref))
            return f"the upload is not the DPM's LoRA (unexpected {extra[:2]}, {len(set(ref) - set(res.state))} missing)"
        for k, v in res.state.items():
            if tuple(v.shape) != tuple(ref[k].shape):
                return f"wrong shape for {k}: {tuple(v.shape)}, expected {tuple(ref[k].shape)}"
        return None

    # ------------------------------------------------------------------ evaluation
    def configure_evaluate(self, rnd, cids):
        return {cid: EvalIns(rnd, None, {}) for cid in cids}   # each device's SLM with its own LoRA

    def evaluate(self, rnd, ctx) -> dict:
        out = summarize_eval(ctx.evaluate(self.configure_evaluate(rnd, ctx.clients)))
        if self._server_eval is None:
            self._server_eval = {}
            set_state(self.llm.model, self.llm_state)
            self._server_eval.update(evaluate_server_model(self.llm.model, self.llm.tokenizer, self.data, self.cfg, "llm/"))
            dpm = self._load_server_dpm()        # the broadcast LoRA with the server's adapters
            self._server_eval.update(evaluate_server_model(dpm.model, dpm.tokenizer, self.data, self.cfg, "dpm/"))
        return {**out, **self._server_eval}

    def export_parties(self) -> list:
        """The server's LLM (its LoRA), each device's SLM (its own LoRA) and the server's DPM (its LoRA over the
        distilled proxy; with DST also the server's domain adapters inside every block, written with their own
        code by `fedlab.export_adapted`)."""
        from fedlab.export import Party
        from fedlab.methods.coplms.client import SLM
        from fedlab.runtime.resident import get_resident

        parties = [Party("llm", self.llm, self.llm_state)]
        dpm = self.server_dpm
        adapters = (self.server_adapters or dpm.initial.get("adapters", {})) if self.cfg.method.dst else {}
        parties.append(Party("dpm", dpm, {**self.global_state, **adapters}))
        states = getattr(self, "client_states", None) or {}
        for c in sorted(states):
            own = {k[len(SLM):]: v for k, v in (states[c] or {}).items() if k.startswith(SLM)}
            if own:
                parties.append(Party(f"slm_{c}", get_resident(self.cfg, self.cfg.model.client_model(c)), own))
        return parties

    def state_dict(self):
        return {"global_state": self.global_state, "llm_state": self.llm_state, "server_adapters": self.server_adapters}

    def load_state_dict(self, state):
        self.global_state, self.llm_state = state["global_state"], state["llm_state"]
        self.server_adapters = state.get("server_adapters")
        self._server_eval = None

    def final_adapters(self):
        return self.llm_state
