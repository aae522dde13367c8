"""Config of `fedproxy` and its variants (light: imported by config validation)."""
from dataclasses import dataclass
from typing import ClassVar

from fedlab.validation import METHOD_NAME_HELP, MethodConfig, check, choose, doc


@dataclass(frozen=True)
class FedProxyConfig(MethodConfig):
    name: str = doc("fedproxy", METHOD_NAME_HELP)
    kappa: float = doc(0.5, "fraction of the LLM's blocks removed to make the proxy (paper Eq. 1)")
    bi_samples: int = doc(256, "public samples for block influence (paper Eq. 4)")
    aggregator: str = doc("h_ties", "how the proxy's client updates merge on the server: h_ties | fedavg (the "
                                    "'w/o H-TIES' ablation) | ties")
    pcr_lambda: float = doc(1e-5, "λ of PCR, the conflict-weighted proximal penalty on the clients (paper Eq. 8); "
                                  "0 is the 'w/o PCR' ablation")
    pcr_weighting: str = doc("conflict", "PCR's per-coordinate weights: conflict (paper Eq. 9) | consensus (1 − C, "
                                         "ablation)")
    r0: float = doc(1.0, "H-TIES base retention r0 (paper Eq. 10)")
    delta: float = doc(0.2, "H-TIES heterogeneity penalty δ (paper Eq. 10)")
    rho: float = doc(1.1, "H-TIES sign-dominance ratio ρ ≥ 1 (paper Eq. 12)")
    eps: float = doc(1e-8, "H-TIES: ε in the sign-dominance ratios P/(N + ε) and N/(P + ε)")
    eta_g: float = doc(1.0, "server step size: φ ← φ + η_g·Δ (paper Eq. 14; 1 is the paper's)")
    denominator: str = doc("agreeing", "H-TIES: agreeing (paper Eq. 13) | all (ablation: the total weight of all "
                                       "clients)")
    density: float = doc(0.2, "TIES density: the fraction of each update's largest coordinates kept "
                              "(aggregator=ties)")
    mu: float = doc(0.0, "FedProx μ on the proxy's clients (0: none)")
    pooled: bool = doc(False, "centralized training of the proxy on pooled data")
    fusion: str = doc("plugin", "how the tuned proxy reaches the LLM: plugin (paper Eq. 3) | proxy_tuning (paper "
                                "Appendix C.2)")

    def plan_roles(self, cfg):
        """The roles `fedlab plan` sizes (fedlab/methods/fedproxy/plan.py)."""
        from fedlab.methods.fedproxy.plan import roles

        return roles(cfg) if self.name == "fedproxy" else None   # its variants: the default shape

    def validate(self, p):
        check(0.0 <= self.kappa < 1.0, f"{p}.kappa", self.kappa, "a fraction of blocks in [0, 1)")
        check(self.bi_samples >= 1, f"{p}.bi_samples", self.bi_samples, "an integer >= 1")
        choose(self.aggregator, ["h_ties", "fedavg", "ties"], f"{p}.aggregator")
        check(self.pcr_lambda >= 0, f"{p}.pcr_lambda", self.pcr_lambda, "a number >= 0")
        choose(self.pcr_weighting, ["conflict", "consensus"], f"{p}.pcr_weighting")
        check(0 <= self.r0 <= 1, f"{p}.r0", self.r0, "a number in [0, 1]")
        check(self.delta >= 0, f"{p}.delta", self.delta, "a number >= 0")
        check(self.rho >= 1, f"{p}.rho", self.rho, "a number >= 1 (the sign-dominance ratio)")
        check(self.eta_g > 0, f"{p}.eta_g", self.eta_g, "a server step size > 0 (1: the paper)")
        choose(self.denominator, ["agreeing", "all"], f"{p}.denominator")
        check(0 < self.density <= 1, f"{p}.density", self.density, "a number in (0, 1]")
        check(self.mu >= 0, f"{p}.mu", self.mu, "a number >= 0")
        choose(self.fusion, ["plugin", "proxy_tuning"], f"{p}.fusion")

    def check_experiment(self, cfg):
        from fedlab.models.inspect import num_blocks

        n = num_blocks(cfg.model.name)
        if n is not None:
            dropped = int(self.kappa * n + 0.5)
            check(dropped < n, "method.kappa", self.kappa,
                  f"a fraction that leaves at least one of the {n} blocks of {cfg.model.name} (kappa < "
                  f"{(n - 0.5) / n:.3f})")
        check(self.bi_samples <= max(1, cfg.data.public_size), "method.bi_samples", self.bi_samples,
              f"at most data.public_size ({cfg.data.public_size})")


@dataclass(frozen=True)
class TiesConfig(FedProxyConfig):
    """TIES-merging on the proxy (no PCR), then the same fusion."""
    name: str = doc("ties", METHOD_NAME_HELP)
    aggregator: str = doc("ties", "how the proxy's client updates merge on the server: h_ties | fedavg | ties "
                                  "(fixed at ties for this method)")
    pcr_lambda: float = doc(0.0, "λ of PCR (fixed at 0 for this method: no PCR)")
    fixed: ClassVar[tuple[str, ...]] = ("aggregator", "pcr_lambda")
    general: ClassVar[str] = "fedproxy"


@dataclass(frozen=True)
class OffsiteConfig(FedProxyConfig):
    """The Offsite-Tuning family on the LLM (fedlab/methods/fedproxy/README.md (FP-18)): adapters = the first
    `adapter_front` and last `adapter_back` blocks with LoRA, emulator = the middle blocks uniformly
    sub-sampled by κ, frozen."""
    name: str = doc("fedot", METHOD_NAME_HELP)
    aggregator: str = doc("fedavg", "how the client updates merge on the server: h_ties | fedavg | ties (fixed at "
                                    "fedavg for the Offsite-Tuning family)")
    pcr_lambda: float = doc(0.0, "λ of PCR (fixed at 0 for the Offsite-Tuning family: no PCR)")
    fixed: ClassVar[tuple[str, ...]] = ("aggregator", "pcr_lambda", "pooled", "train_emulator", "realign")
    adapter_front: int = doc(2, "the adapter's first blocks: this many blocks at the front of the LLM, tuned with "
                                "LoRA")
    adapter_back: int = doc(2, "the adapter's last blocks: this many blocks at the back of the LLM, tuned with LoRA")
    size: str = doc("paper", "the model's size: paper (the adapters around a middle compressed by κ, as the paper "
                             "builds it) | proxy (as many blocks as FedProxy's proxy at the same κ, to compare at "
                             "equal size)")
    train_emulator: bool = doc(False, "FedOT-ET: LoRA on the emulator too (discarded at plug-in)")
    realign: bool = doc(False, "FedBiOT: the server re-aligns the emulator by KD on public data")
    realign_steps: int = doc(10, "FedBiOT: the server's emulator re-alignment steps per round")
    realign_lr: float = doc(1e-4, "FedBiOT: AdamW learning rate of the emulator re-alignment")

    def validate(self, p):
        super().validate(p)
        check(self.adapter_front >= 0 and self.adapter_back >= 0 and self.adapter_front + self.adapter_back >= 1,
              f"{p}.adapter_front", self.adapter_front, "adapter_front, adapter_back >= 0 with at least one adapter")
        choose(self.size, ["paper", "proxy"], f"{p}.size")
        check(self.realign_steps >= 1, f"{p}.realign_steps", self.realign_steps, "an integer >= 1")
        check(self.realign_lr > 0, f"{p}.realign_lr", self.realign_lr, "a number > 0")
        check(self.fusion == "plugin", f"{p}.fusion", self.fusion, "'plugin' (adapters are plugged into the LLM)")

    def check_experiment(self, cfg):
        from fedlab.models.inspect import num_blocks

        n = num_blocks(cfg.model.name)
        if n is not None and self.size == "paper":      # at the proxy's size the adapters shrink to fit
            check(n > self.adapter_front + self.adapter_back, "method.adapter_front", self.adapter_front,
                  f"adapters that leave a middle for the emulator: adapter_front + adapter_back < {n} blocks")


@dataclass(frozen=True)
class OTConfig(OffsiteConfig):
    """Offsite-Tuning with one data owner holding the pooled data."""
    name: str = doc("ot", METHOD_NAME_HELP)
    pooled: bool = doc(True, "one data owner trains on the pooled data (fixed for this method)")


@dataclass(frozen=True)
class FedBiOTConfig(OffsiteConfig):
    """FedBiOT: adapter = the last 4 blocks; the server re-aligns the emulator each round."""
    name: str = doc("fedbiot", METHOD_NAME_HELP)
    adapter_front: int = doc(0, "the adapter's first blocks: this many blocks at the front of the LLM, tuned with "
                                "LoRA (FedBiOT: none)")
    adapter_back: int = doc(4, "the adapter's last blocks: this many blocks at the back of the LLM, tuned with LoRA "
                               "(FedBiOT: the last 4)")
    realign: bool = doc(True, "the server re-aligns the emulator by KD on public data each round (fixed for FedBiOT)")


@dataclass(frozen=True)
class FedOTETConfig(OffsiteConfig):
    """FedOT-ET: the emulator is trained too."""
    name: str = doc("fedot_et", METHOD_NAME_HELP)
    train_emulator: bool = doc(True, "LoRA on the emulator too, discarded at plug-in (fixed for FedOT-ET)")
