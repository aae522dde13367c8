"""Config of `fedcollm` (light: imported by config validation)."""
from dataclasses import dataclass
from typing import ClassVar, Optional

from fedlab.validation import METHOD_NAME_HELP, MethodConfig, check, choose, doc


@dataclass(frozen=True)
class FedCoLLMConfig(MethodConfig):
    """model.name is the server's LLM, model.clients the devices' SLMs (any architectures)."""
    name: str = doc("fedcollm", METHOD_NAME_HELP)
    heterogeneous_clients: ClassVar[bool] = True
    server_fits: ClassVar[bool] = True    # its server trains a model: backend.server_devices applies (objectives/server_devices.py)

    topk: int = doc(16, "K of the pooled KL between the LLM and an SLM")
    alpha: float = doc(0.5, "the SLM's loss: α·KL(LLM → SLM) + (1 − α)·CE on the server's data")
    beta: float = doc(0.5, "the LLM's loss: β·KL(SLM → LLM) + (1 − β)·CE")
    server_epochs: int = doc(1, "mutual-distillation epochs per SLM per round")
    server_lr: Optional[float] = doc(None, "learning rate of the server's mutual distillation; null: federation.lr")
    kt_reduction: str = doc("mean", "how L_kt is reduced: mean (per paired answer token) | sum (per example, "
                                    "summed over its positions: the ablation, which makes α and β act about 4× "
                                    "stronger than written)")
    pool_index: str = doc("teacher", "the vocabulary ids of the top-K pooling: teacher (the teacher's top-K for "
                                     "both sides) | own (each side its own top-K, the paper's literal reading)")

    def plan_roles(self, cfg):
        """The roles `fedlab plan` sizes (fedlab/methods/fedcollm/plan.py)."""
        from fedlab.methods.fedcollm.plan import roles

        return roles(cfg)

    def validate(self, p):
        check(self.topk >= 1, f"{p}.topk", self.topk, "an integer >= 1")
        check(0.0 <= self.alpha <= 1.0, f"{p}.alpha", self.alpha, "a number in [0, 1]")
        check(0.0 <= self.beta <= 1.0, f"{p}.beta", self.beta, "a number in [0, 1]")
        check(self.server_epochs >= 1, f"{p}.server_epochs", self.server_epochs, "an integer >= 1")
        check(self.server_lr is None or self.server_lr > 0, f"{p}.server_lr", self.server_lr, "null or a number > 0")
        choose(self.pool_index, ["teacher", "own"], f"{p}.pool_index")
        choose(self.kt_reduction, ["mean", "sum"], f"{p}.kt_reduction")

    def check_experiment(self, cfg):
        check(cfg.data.public_count() >= 1, "data.public_size", cfg.data.public_size,
              "a server data set of at least one sample (FedCoLLM distils on it)")
