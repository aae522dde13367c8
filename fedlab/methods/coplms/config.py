"""Config of `coplms` and its ablations (light: imported by config validation)."""
from dataclasses import dataclass
from typing import ClassVar, Optional

from fedlab.validation import METHOD_NAME_HELP, MethodConfig, check, choose, doc


@dataclass(frozen=True)
class CoPLMsConfig(MethodConfig):
    """Co-PLMs (paper 004, fedlab/methods/coplms/README.md): model.name is the server's LLM, model.clients the
    devices' SLMs; the distilled proxy model (DPM) shares the LLM's tokenizer and lives on every device beside
    its SLM."""
    name: str = doc("coplms", METHOD_NAME_HELP)
    server_fits: ClassVar[bool] = True    # its server trains a model: backend.server_devices applies (objectives/server_devices.py)
    heterogeneous_clients: ClassVar[bool] = True   # SLMs of any architecture: only the DPM's LoRA is averaged

    # the DPM (README (CP-1), (CP-2))
    dpm_init: str = doc("compress", "how the DPM is made: compress (FedProxy's block-influence compression of the "
                                    "LLM) | a zoo model name that shares the LLM's tokenizer")
    kappa: float = doc(0.5, "with dpm_init compress: fraction of the LLM's blocks dropped (FedProxy paper Eq. 1)")
    dpm_distill: str = doc("reverse", "the DPM's distillation from the LLM: reverse (token-level reverse KL, MiniLLM "
                                      "simplified) | forward | none")
    dpm_epochs: int = doc(3, "distillation epochs on the server's data")
    dpm_lr: float = doc(1e-3, "learning rate of the DPM's distillation")
    dpm_lora_r: Optional[int] = doc(
        4, "LoRA rank of the DPM (α scaled with it: α/r as model.lora's); null: model.lora.r. The DPM keeps the "
           "LLM's width, so at model.lora.r its LoRA outweighs a narrower SLM's (1.5× tiny-llama-s's at κ = 0.5): at "
           "r = 4 the DPM's upload is below every shipped SLM's, as Co-PLMs' communication claim needs (checked "
           "before a run)")
    dpm_upload_check: bool = doc(True, "refuse a DPM whose LoRA is not smaller than every device SLM's "
                                       "(fedlab/methods/coplms/upload.py)")
    # DST (README (CP-3), (CP-4))
    dst: bool = doc(True, "domain adapters on the DPM's blocks, trained on CE, never uploaded")
    adapter_width: float = doc(0.25, "hidden size of each domain adapter, a fraction of the model width d (d/4)")
    dst_epochs: int = doc(1, "epochs of domain-adapter training (DST) per round, on the devices' and the server's "
                             "data")
    # SAML (README (CP-5) – (CP-8))
    topk: int = doc(16, "K of the top-K pooling")
    alpha: float = doc(0.5, "L_dpm = α·L_kt(SLM→DPM) + (1 − α)·CE")
    beta: float = doc(0.5, "L_slm = β·L_kt(DPM→SLM) + (1 − β)·CE")
    saml_epochs: int = doc(1, "device SAML epochs per round")
    kt_reduction: str = doc("mean", "how L_kt is reduced: mean (per paired answer token) | sum (per example, "
                                    "summed over its positions: the ablation, which makes α and β act about 4× "
                                    "stronger than written)")
    pool_index: str = doc("teacher", "the vocabulary ids of the top-K pooling: teacher (the teacher's top-K for "
                                     "both sides) | own (each side its own top-K, the paper's literal reading)")
    server_saml: bool = doc(True, "false (ablation w/o SAML): the LLM gets CE tuning on the server's data")
    server_epochs: int = doc(1, "server SAML (or CE) epochs per round")
    server_lr: Optional[float] = doc(None, "learning rate of the server's SAML (or CE) tuning; null: federation.lr")

    def plan_roles(self, cfg):
        """The roles `fedlab plan` sizes (fedlab/methods/coplms/plan.py)."""
        from fedlab.methods.coplms.plan import roles

        return roles(cfg)

    def validate(self, p):
        check(bool(self.dpm_init), f"{p}.dpm_init", self.dpm_init, "'compress' or a zoo model name")
        check(0.0 <= self.kappa < 1.0, f"{p}.kappa", self.kappa, "a fraction of blocks in [0, 1)")
        choose(self.dpm_distill, ["reverse", "forward", "none"], f"{p}.dpm_distill")
        check(self.dpm_epochs >= 0, f"{p}.dpm_epochs", self.dpm_epochs, "an integer >= 0")
        check(self.dpm_lr > 0, f"{p}.dpm_lr", self.dpm_lr, "a number > 0")
        check(self.dpm_lora_r is None or self.dpm_lora_r >= 1, f"{p}.dpm_lora_r", self.dpm_lora_r,
              "null (model.lora.r) or an integer >= 1")
        check(0 < self.adapter_width <= 4, f"{p}.adapter_width", self.adapter_width, "a fraction of d in (0, 4]")
        check(self.dst_epochs >= 1, f"{p}.dst_epochs", self.dst_epochs, "an integer >= 1")
        check(self.topk >= 1, f"{p}.topk", self.topk, "an integer >= 1")
        check(0.0 <= self.alpha <= 1.0, f"{p}.alpha", self.alpha, "a number in [0, 1]")
        check(0.0 <= self.beta <= 1.0, f"{p}.beta", self.beta, "a number in [0, 1]")
        check(self.saml_epochs >= 1, f"{p}.saml_epochs", self.saml_epochs, "an integer >= 1")
        choose(self.pool_index, ["teacher", "own"], f"{p}.pool_index")
        choose(self.kt_reduction, ["mean", "sum"], f"{p}.kt_reduction")
        check(self.server_epochs >= 1, f"{p}.server_epochs", self.server_epochs, "an integer >= 1")
        check(self.server_lr is None or self.server_lr > 0, f"{p}.server_lr", self.server_lr, "null or a number > 0")

    def check_experiment(self, cfg):
        from fedlab.transforms.compress import n_dropped

        check(cfg.data.public_count() >= 1, "data.public_size", cfg.data.public_size,
              "a server data set of at least one sample (Co-PLMs distils the DPM and runs server SAML on it)")
        if self.dpm_init == "compress":
            blocks = _num_blocks(cfg.model.name)
            if blocks is not None:
                check(n_dropped(blocks, self.kappa) < blocks, "method.kappa", self.kappa,
                      f"a fraction that keeps at least one of the LLM's {blocks} blocks "
                      f"(kappa < {(blocks - 0.5) / blocks:.3f})")


def _num_blocks(name: str) -> int | None:
    """The LLM's block count from its config without loading weights (None when it cannot be read)."""
    from fedlab.models.zoo import ZOO

    if name in ZOO:
        spec = ZOO[name]
        cfg = spec.make_config(spec.vocab_size, 0, 1)
        return getattr(cfg, "num_hidden_layers", None) or getattr(cfg, "n_layer", None)
    return None


@dataclass(frozen=True)
class CoPLMsNoDSTConfig(CoPLMsConfig):
    """Ablation w/o DST: no domain adapters on the DPM."""
    name: str = doc("coplms_no_dst", METHOD_NAME_HELP)
    dst: bool = doc(False, "domain adapters on the DPM's blocks: off (fixed for this ablation; method.name=coplms "
                           "turns them on)")
    fixed: ClassVar[tuple[str, ...]] = ("dst",)
    general: ClassVar[str] = "coplms"


@dataclass(frozen=True)
class CoPLMsNoSAMLConfig(CoPLMsConfig):
    """Ablation w/o SAML: no server SAML; the LLM gets CE LoRA tuning on the server's data instead."""
    name: str = doc("coplms_no_saml", METHOD_NAME_HELP)
    server_saml: bool = doc(False, "false: the LLM gets CE tuning on the server's data instead of server SAML (fixed "
                                   "for this ablation)")
    fixed: ClassVar[tuple[str, ...]] = ("server_saml",)
    general: ClassVar[str] = "coplms"
