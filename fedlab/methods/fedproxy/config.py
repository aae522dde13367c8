"""Config of `fedproxy` and its variants (light: imported by config validation)."""
from dataclasses import dataclass
from typing import ClassVar

from fedlab.validation import MethodConfig, check, choose


@dataclass(frozen=True)
class FedProxyConfig(MethodConfig):
    name: str = "fedproxy"
    kappa: float = 0.5               # fraction of the LLM's blocks removed to make the proxy (Eq. 1)
    bi_samples: int = 256            # public samples for block influence (Eq. 4)
    aggregator: str = "h_ties"       # h_ties | fedavg (the 'w/o H-TIES' ablation) | ties
    pcr_lambda: float = 1e-5         # λ of PCR (Eq. 8); 0 is the 'w/o PCR' ablation
    pcr_weighting: str = "conflict"  # conflict (Eq. 9) | consensus (1 − C, ablation)
    r0: float = 1.0                  # H-TIES base retention (Eq. 10)
    delta: float = 0.2               # H-TIES heterogeneity penalty δ
    rho: float = 1.1                 # H-TIES sign-dominance ratio ρ ≥ 1 (Eq. 12)
    eps: float = 1e-8
    eta_g: float = 1.0               # server step size: φ ← φ + η_g·Δ (Eq. 14; 1 is the paper, SPEC §1.4)
    denominator: str = "agreeing"    # H-TIES: agreeing (Eq. 13) | all (ablation: the total weight of all clients)
    density: float = 0.2             # TIES density (aggregator=ties)
    mu: float = 0.0                  # FedProx μ on the proxy's clients (0: none)
    pooled: bool = False             # centralized training of the proxy on pooled data
    fusion: str = "plugin"           # plugin (Eq. 3) | proxy_tuning (Appendix C.2)

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
    name: str = "ties"
    aggregator: str = "ties"
    pcr_lambda: float = 0.0
    fixed: ClassVar[tuple[str, ...]] = ("aggregator", "pcr_lambda")
    general: ClassVar[str] = "fedproxy"


@dataclass(frozen=True)
class OffsiteConfig(FedProxyConfig):
    """The Offsite-Tuning family on the LLM (SPEC.md §1.6): adapters = the first `adapter_front` and last
    `adapter_back` blocks with LoRA, emulator = the middle blocks uniformly sub-sampled by κ, frozen."""
    name: str = "fedot"
    aggregator: str = "fedavg"
    pcr_lambda: float = 0.0
    fixed: ClassVar[tuple[str, ...]] = ("aggregator", "pcr_lambda", "pooled", "train_emulator", "realign")
    adapter_front: int = 2
    adapter_back: int = 2
    train_emulator: bool = False     # FedOT-ET: LoRA on the emulator too (discarded at plug-in)
    realign: bool = False            # FedBiOT: the server re-aligns the emulator by KD on public data
    realign_steps: int = 10
    realign_lr: float = 1e-4

    def validate(self, p):
        super().validate(p)
        check(self.adapter_front >= 0 and self.adapter_back >= 0 and self.adapter_front + self.adapter_back >= 1,
              f"{p}.adapter_front", self.adapter_front, "adapter_front, adapter_back >= 0 with at least one adapter")
        check(self.realign_steps >= 1, f"{p}.realign_steps", self.realign_steps, "an integer >= 1")
        check(self.realign_lr > 0, f"{p}.realign_lr", self.realign_lr, "a number > 0")
        check(self.fusion == "plugin", f"{p}.fusion", self.fusion, "'plugin' (adapters are plugged into the LLM)")

    def check_experiment(self, cfg):
        from fedlab.models.inspect import num_blocks

        n = num_blocks(cfg.model.name)
        if n is not None:
            check(n > self.adapter_front + self.adapter_back, "method.adapter_front", self.adapter_front,
                  f"adapters that leave a middle for the emulator: adapter_front + adapter_back < {n} blocks")


@dataclass(frozen=True)
class OTConfig(OffsiteConfig):
    """Offsite-Tuning with one data owner holding the pooled data."""
    name: str = "ot"
    pooled: bool = True


@dataclass(frozen=True)
class FedBiOTConfig(OffsiteConfig):
    """FedBiOT: adapter = the last 4 blocks; the server re-aligns the emulator each round."""
    name: str = "fedbiot"
    adapter_front: int = 0
    adapter_back: int = 4
    realign: bool = True


@dataclass(frozen=True)
class FedOTETConfig(OffsiteConfig):
    """FedOT-ET: the emulator is trained too."""
    name: str = "fedot_et"
    train_emulator: bool = True
