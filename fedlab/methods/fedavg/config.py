"""Config of `fedavg` (light: imported by config validation)."""
from dataclasses import dataclass

from fedlab.validation import METHOD_NAME_HELP, MethodConfig, check, choose, doc


@dataclass(frozen=True)
class FedAvgConfig(MethodConfig):
    name: str = doc("fedavg", METHOD_NAME_HELP)
    weighting: str = doc("examples", "weights of the client updates in the mean (aggregator mean only): examples "
                                     "(by each client's example count) | uniform (equal weights)")
    aggregator: str = doc("mean", "how the server combines the client updates: mean (FedAvg) | median | trimmed_mean "
                                  "| krum (robust options for untrusted clients)")
    trim: float = doc(0.1, "trimmed_mean: fraction cut at each end per coordinate")
    krum_f: int = doc(1, "krum: assumed number of attackers f")
    krum_m: int = doc(1, "krum: average of the m best-scored updates (1 = Krum, >1 = Multi-Krum)")

    def validate(self, p):
        check(self.weighting in ("examples", "uniform"), f"{p}.weighting", self.weighting,
              "'examples' or 'uniform'")
        choose(self.aggregator, ["mean", "median", "trimmed_mean", "krum"], f"{p}.aggregator")
        check(0 <= self.trim < 0.5, f"{p}.trim", self.trim, "a number in [0, 0.5)")
        check(self.krum_f >= 0, f"{p}.krum_f", self.krum_f, "an integer >= 0")
        check(self.krum_m >= 1, f"{p}.krum_m", self.krum_m, "an integer >= 1")
