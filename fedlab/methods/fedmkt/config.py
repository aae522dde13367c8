"""Config of `fedmkt` and `llm2slm` (light: imported by config validation)."""
from dataclasses import dataclass
from typing import ClassVar, Optional

from fedlab.validation import METHOD_NAME_HELP, MethodConfig, check, choose, doc


@dataclass(frozen=True)
class FedMKTConfig(MethodConfig):
    """FedMKT (paper 001, fedlab/methods/fedmkt/README.md): model.name is the server's LLM, model.clients the
    clients' SLMs."""
    name: str = doc("fedmkt", METHOD_NAME_HELP)
    heterogeneous_clients: ClassVar[bool] = True   # logits cross the wire, not weights
    server_fits: ClassVar[bool] = True    # its server trains a model: backend.server_devices applies (objectives/server_devices.py)

    topk: int = doc(16, "K: top-K logits per position in a knowledge message")
    lam: float = doc(0.9, "λ of L2 / L3: λ·CE(labels) + (1 − λ)·CE(student, teacher)")
    temperature: float = doc(1.0, "T of softmax(aligned top-K / T)")
    server_epochs: int = doc(1, "R: the LLM's distillation epochs per round")
    distill_epochs: int = doc(1, "E of the clients' L3 phase (local training uses federation.local_epochs)")
    server_lr: Optional[float] = doc(None, "η_ω, the LLM's learning rate; null: federation.lr")
    client_lr: Optional[list[float]] = doc(None, "η_θ per client (paper Appendix D.1 has one per SLM); null: "
                                                 "federation.lr")
    selection: str = doc("dualmince", "which public samples are distilled on: dualmince (paper Algorithm 2) | all "
                                      "(ablation: every public sample)")
    kd_positions: str = doc("all", "where the KD term applies: all (every position with a next token; FedMKT "
                                   "README) | target (answer tokens only)")
    mutual: bool = doc(True, "true: the LLM also learns from the clients; false: the LLM is frozen and only teaches "
                             "(LLM2SLM)")
    logit_dtype: str = doc("float32", "precision of the logits on the wire: float32 | float16")
    public_batch_size: int = doc(32, "forward batch size on the public set")

    def plan_roles(self, cfg):
        """The roles `fedlab plan` sizes (fedlab/methods/fedmkt/plan.py)."""
        from fedlab.methods.fedmkt.plan import roles

        return roles(cfg)

    def validate(self, p):
        check(self.topk >= 1, f"{p}.topk", self.topk, "an integer >= 1")
        check(0.0 <= self.lam <= 1.0, f"{p}.lam", self.lam, "a number in [0, 1]")
        check(self.temperature > 0, f"{p}.temperature", self.temperature, "a number > 0")
        check(self.server_epochs >= 1, f"{p}.server_epochs", self.server_epochs, "an integer >= 1")
        check(self.distill_epochs >= 1, f"{p}.distill_epochs", self.distill_epochs, "an integer >= 1")
        check(self.server_lr is None or self.server_lr > 0, f"{p}.server_lr", self.server_lr, "null or a number > 0")
        check(self.client_lr is None or all(x > 0 for x in self.client_lr), f"{p}.client_lr", self.client_lr,
              "null or a list of numbers > 0, one per client")
        choose(self.selection, ["dualmince", "all"], f"{p}.selection")
        choose(self.kd_positions, ["all", "target"], f"{p}.kd_positions")
        choose(self.logit_dtype, ["float32", "float16"], f"{p}.logit_dtype")
        check(self.public_batch_size >= 1, f"{p}.public_batch_size", self.public_batch_size, "an integer >= 1")

    def check_experiment(self, cfg):
        n = cfg.data.num_clients
        if self.client_lr is not None:
            check(len(self.client_lr) == n, "method.client_lr", self.client_lr,
                  f"one learning rate per client (data.num_clients={n})")
        check(cfg.data.public_count() >= 1, "data.public_size", cfg.data.public_size,
              "a public set of at least one sample (FedMKT distils on it)")


@dataclass(frozen=True)
class LLM2SLMConfig(FedMKTConfig):
    """LLM2SLM baseline: FedMKT with the server's LLM frozen; it only teaches the clients."""
    name: str = doc("llm2slm", METHOD_NAME_HELP)
    mutual: bool = doc(False, "false: the LLM is frozen and only teaches (fixed for LLM2SLM; method.name=fedmkt "
                              "makes it learn)")
    fixed: ClassVar[tuple[str, ...]] = ("mutual",)
    server_fits: ClassVar[bool] = False   # the LLM is frozen: the server trains nothing
    general: ClassVar[str] = "fedmkt"
