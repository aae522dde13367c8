"""Privacy budgets of local DP, from Opacus' RDP accountant (Mironov 2017; the sampled Gaussian mechanism's
RDP of Mironov, Talwar & Zhang 2019), chosen because it is maintained with the per-example-gradient code
fedlab already takes from Opacus and needs nothing beyond numpy/scipy.

The server keeps, per client, the history of (noise multiplier σ, sampling rate q, steps) of every round the
client trained in, and reports ε at the configured δ:
    DP-SGD        q = B / n_i (a batch out of the client's n_i examples), steps = the round's local steps
    update-level  q = 1, one step per round (each participation releases one noisy update)"""
from __future__ import annotations


class PrivacyLedger:
    def __init__(self):
        self.history: dict[int, list[tuple[float, float, int]]] = {}

    def record(self, cid: int, noise: float, sample_rate: float, steps: int) -> None:
        self.history.setdefault(int(cid), []).append((float(noise), float(sample_rate), int(steps)))

    def epsilon(self, cid: int, delta: float) -> float:
        """ε(δ) of everything client `cid` has released so far (0 before it trained)."""
        from opacus.accountants import RDPAccountant

        if not self.history.get(int(cid)):
            return 0.0
        acc = RDPAccountant()
        acc.history = list(self.history[int(cid)])
        return float(acc.get_epsilon(delta=delta))

    def state_dict(self) -> dict:
        return {str(k): [list(h) for h in v] for k, v in self.history.items()}

    def load_state_dict(self, state: dict) -> None:
        self.history = {int(k): [tuple(h) for h in v] for k, v in state.items()}
