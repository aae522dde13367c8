"""Config of `elsa` and of the baselines that run in its split + sketch pipeline (light: imported by config
validation). The defaults are the paper's where it gives them, scaled where the embedded model is smaller
(fedlab/methods/elsa/README.md)."""
from dataclasses import dataclass
from typing import Optional

from fedlab.validation import METHOD_NAME_HELP, MethodConfig, check, choose, doc

GROUPINGS = ("trust", "nearest", "random", "single")
AGGREGATIONS = ("trust", "sizes")
SERVER_OPTS = ("none", "amsgrad", "momentum")


@dataclass(frozen=True)
class ElsaConfig(MethodConfig):
    name: str = doc("elsa", METHOD_NAME_HELP)
    split: Optional[tuple[int, int, int]] = doc(
        None, "split p / q / o of the encoder's blocks (client front / edge middle / client back); null: the "
              "model's default (pico-bert 1/1/1, tiny-bert 3/2/1, minilm-l6 3/2/1, BERT-base 6/4/2)")
    rho_steps: int = doc(4, "ϱ client–edge rounds (mini-batch steps) per global round")
    local_epochs: Optional[float] = doc(
        None, "local work scaled to the client's data instead (see the ELSA README): ⌈local_epochs·|D_n|/B⌉ split "
              "steps per round for client n; null: rho_steps for every client")
    pooling: str = doc("mean", "the head's input: mean (of the last layer's token vectors) | cls ([CLS])")
    ratio: float = doc(4.2, "count-sketch compression ratio ρ of the client–edge link (1: raw floats, no sketch)")
    sketch_rows: int = doc(3, "Y, the count sketch's rows (odd: the median of the rows is defined)")
    sketch_hashes: str = doc("fixed", "fixed: one sketch per link for the run | per_step: re-drawn every (round, "
                                      "step)")
    link_codec: str = doc("sketch", "sketch: the count sketch on the wire | noise (control): raw floats plus "
                                    "Gaussian noise of the sketch's MSE")
    ssop_rank: int = doc(8, "SS-OP rank r of the client's uplink rotation 𝒬_n (0: no SS-OP)")
    ssop_salt: str = doc("elsa", "salt of each client's SS-OP rotation seed hash(salt ‖ n)")
    ssop_tokens: int = doc(256, "layer-p token vectors of the client's first batches that form J_n (SS-OP)")
    # fingerprints and trust
    warmup_steps: int = doc(8, "local, uncompressed steps before the probe embeddings")
    probe_size: int = doc(32, "Q public probe texts")
    fingerprint: str = doc(
        "pooled", "what the fingerprint is made of: pooled — the head's input T_n^j (the paper's [CLS] embeddings) | "
                  "predictions — the head's output, log p(y | probe) (declared deviation: the paper's \"prediction "
                  "consistency\" read literally; its confidence term is then the mean prediction entropy instead of "
                  "mean 1/‖T‖)")
    shrinkage: Optional[float] = doc(None, "fingerprint covariance shrinkage; null: Ledoit–Wolf")
    divergence_scale: str = doc(
        "per_dim", "per_dim: R/D (a temperature; D the fingerprint's width, the head's label set for predictions) | "
                   "raw: R | median: R / median R")
    divergence: str = doc(
        "gaussian", "how two clients' fingerprints are compared: gaussian — symmetric KL between Gaussians fitted "
                    "to each client's probe vectors (the paper's) | paired — with fingerprint: predictions, the "
                    "symmetric KL between the two clients' predictions on each shared probe, averaged over the "
                    "probes (declared deviation: the Gaussian keeps no record of which probe gave which answer)")
    gamma: float = doc(1.0, "γ of the affinity exp(−γ R̂) between two clients")
    w_excl: float = doc(0.1, "relative trust below which a client is excluded")
    w_min: float = doc(0.3, "mean relative trust below which a group is merged")
    # topology
    num_edges: int = doc(4, "K edge servers, placed at random in the area (seeded)")
    area_km: float = doc(8.0, "side (km) of the square area the clients and edges are placed in")
    tau_max_ms: float = doc(200.0, "τ_max: an edge is feasible for a client when their round trip is at most this "
                                   "(ms)")
    cloud_km: float = doc(20.0, "Simple SL's cloud: its distance from the area's centre, with the edges' latency "
                                "model (fedlab's choice; the paper gives none)")
    # who trains under which edge and how the cloud aggregates
    grouping: str = doc(
        "trust", "who trains under which edge: trust (ELSA) | nearest (nearest feasible edge) | random "
                 "(FedAvg(Random): a random half of the clients each round, random feasible edges) | single (Simple "
                 "SL: one edge for everyone, the cloud)")
    aggregation: str = doc("trust", "the cloud's weights of the edges: trust (α_k = w̄_k/(1+R̄_k)) | sizes (Σ|D| "
                                    "over the edges)")
    server_opt: str = doc(
        "none", "the cloud's step on the aggregated update: none | amsgrad (FedAMS: AMSGrad) | momentum (FedAvgM: "
                "heavy-ball momentum β₁ = server_betas[0], step server_lr)")
    server_lr: float = doc(1.0, "η, the step size of server_opt (amsgrad, momentum)")
    server_betas: tuple[float, float] = doc((0.9, 0.99), "(β₁, β₂) of server_opt (momentum uses β₁ only)")
    server_eps: float = doc(1e-3, "amsgrad: the floor ε of v̂")
    prox_mu: float = doc(0.0, "FedProx's μ on the client's parameters (0: none)")
    client_opt: str = doc(
        "adamw", "the optimiser of the clients' and the edges' parameters: adamw | fedcada (FedCAda: Adam whose "
                 "moments the cloud aggregates and sends back, with the correction m̂ = m/(1 − β1^k + γ/r), "
                 "fedlab/methods/elsa/fedcada.py) | sgd (plain SGD, no state: a step moves each parameter by lr × its "
                 "gradient, where a fresh AdamW's first steps move every parameter by about lr whatever its gradient "
                 "— under label skew that drives each client to its own classes)")
    lr_schedule: str = doc(
        "constant", "the learning rate over the global rounds, for the clients' and the edges' optimisers: constant "
                    "| cosine (lr_g = lr · ½(1 + cos(π (g − 1) / G)) in round g of G; the warm-up takes lr)")
    logit_adjust: float = doc(
        0.0, "τ of the logit-adjusted client loss, CE(logits + τ·log π_n, y) with π_n the client's own class "
             "frequencies (a label-skew correction; 0: plain cross-entropy, the paper's). Prediction always uses the "
             "plain logits")
    fedcada_gamma: float = doc(1.0, "client_opt fedcada: γ of the correction m̂ = m/(1 − β1^k + γ/r), r the round")
    xi: float = doc(0.0, "stop when ‖θ_g − θ_{g−1}‖ ≤ ξ (0: run every round)")
    # communication model (Eq. 14–15)
    bandwidth_mbps: tuple[float, float] = doc((50.0, 100.0), "B_eff drawn per client in this range (Mbps, seeded)")

    def plan_roles(self, cfg):
        """The roles `fedlab plan` sizes (fedlab/methods/elsa/plan.py)."""
        from fedlab.methods.elsa.plan import roles

        return roles(cfg)

    def validate(self, p):
        if self.split is not None:
            check(len(self.split) == 3 and all(int(x) >= 1 for x in self.split), f"{p}.split", self.split,
                  "null or three integers >= 1 (p, q, o)")
        check(self.rho_steps >= 1, f"{p}.rho_steps", self.rho_steps, "an integer >= 1")
        check(self.local_epochs is None or self.local_epochs > 0, f"{p}.local_epochs", self.local_epochs,
              "null (rho_steps steps for every client) or a number of local epochs > 0")
        choose(self.pooling, ["mean", "cls"], f"{p}.pooling")
        choose(self.lr_schedule, ["constant", "cosine"], f"{p}.lr_schedule")
        check(self.logit_adjust >= 0, f"{p}.logit_adjust", self.logit_adjust, "a number >= 0 (0: plain cross-entropy)")
        choose(self.sketch_hashes, ["fixed", "per_step"], f"{p}.sketch_hashes")
        choose(self.link_codec, ["sketch", "noise"], f"{p}.link_codec")
        check(self.link_codec == "sketch" or self.ratio > 1, f"{p}.link_codec", self.link_codec,
              "'sketch' when method.ratio is 1 (the noise control takes the MSE of a sketch at ratio > 1)")
        check(self.cloud_km >= 0, f"{p}.cloud_km", self.cloud_km, "a number >= 0")
        check(self.ratio == 1 or self.ratio > 1, f"{p}.ratio", self.ratio,
              "1 (no sketch) or a compression ratio > 1 (a sketch with ρ ≤ 1 does not compress)")
        check(self.sketch_rows >= 1 and self.sketch_rows % 2 == 1, f"{p}.sketch_rows", self.sketch_rows,
              "an odd integer >= 1")
        check(self.ssop_rank >= 0, f"{p}.ssop_rank", self.ssop_rank, "an integer >= 0 (0: no SS-OP)")
        check(self.warmup_steps >= 1, f"{p}.warmup_steps", self.warmup_steps, "an integer >= 1")
        check(self.probe_size >= 2, f"{p}.probe_size", self.probe_size, "an integer >= 2")
        choose(self.fingerprint, ("pooled", "predictions"), f"{p}.fingerprint")
        check(self.shrinkage is None or 0 <= self.shrinkage <= 1, f"{p}.shrinkage", self.shrinkage,
              "null or a number in [0, 1]")
        choose(self.divergence_scale, ["per_dim", "raw", "median"], f"{p}.divergence_scale")
        choose(self.divergence, ("gaussian", "paired"), f"{p}.divergence")
        check(self.divergence == "gaussian" or self.fingerprint == "predictions", f"{p}.divergence", self.divergence,
              "'gaussian' unless method.fingerprint is 'predictions' (paired compares predictions probe by probe)")
        check(self.divergence == "gaussian" or self.shrinkage is None, f"{p}.shrinkage", self.shrinkage,
              "null with method.divergence: paired (shrinkage is the Gaussian fingerprint's covariance)")
        check(0 <= self.w_excl <= 1, f"{p}.w_excl", self.w_excl, "a number in [0, 1]")
        check(0 <= self.w_min <= 1, f"{p}.w_min", self.w_min, "a number in [0, 1]")
        check(self.num_edges >= 1, f"{p}.num_edges", self.num_edges, "an integer >= 1")
        check(self.tau_max_ms > 0, f"{p}.tau_max_ms", self.tau_max_ms, "a number > 0")
        check(self.area_km > 0, f"{p}.area_km", self.area_km, "a number > 0")
        choose(self.grouping, GROUPINGS, f"{p}.grouping")
        choose(self.aggregation, AGGREGATIONS, f"{p}.aggregation")
        check(self.aggregation == "sizes" or self.grouping == "trust", f"{p}.aggregation", self.aggregation,
              "'sizes' unless method.grouping is 'trust' (α_k needs the trust of the groups)")
        choose(self.server_opt, SERVER_OPTS, f"{p}.server_opt")
        check(self.server_lr > 0, f"{p}.server_lr", self.server_lr, "a number > 0")
        check(self.server_eps > 0, f"{p}.server_eps", self.server_eps, "a number > 0")
        check(self.prox_mu >= 0, f"{p}.prox_mu", self.prox_mu, "a number >= 0")
        choose(self.client_opt, ["adamw", "sgd", "fedcada"], f"{p}.client_opt")
        check(self.fedcada_gamma >= 0, f"{p}.fedcada_gamma", self.fedcada_gamma, "a number >= 0")
        check(self.xi >= 0, f"{p}.xi", self.xi, "a number >= 0")
        lo, hi = self.bandwidth_mbps
        check(0 < lo <= hi, f"{p}.bandwidth_mbps", self.bandwidth_mbps, "[low, high] Mbps with 0 < low <= high")


def server_step_warning(m: ElsaConfig) -> Optional[str]:
    """A warning when FedAMS's server step is far larger than FedAvg's: where v̂ sits at its floor ε the step is
    η·m/√ε, i.e. about η/√ε times the averaged update once m has built up. The threshold 3× is a chosen margin;
    the evidence is η = 1 (31.6× at ε = 1e-3), which diverged at the tables' budget (README, FedAMS row). None
    when the optimiser is not AMSGrad or η/√ε ≤ 3."""
    if m.server_opt != "amsgrad":
        return None
    factor = m.server_lr / m.server_eps ** 0.5
    if factor <= 3:
        return None
    return (f"[fedlab] elsa: method.server_opt=amsgrad with method.server_lr={m.server_lr:g}: where v̂ sits at its "
            f"floor method.server_eps={m.server_eps:g} the server step is {factor:.1f}x the averaged update; "
            f"method.server_lr={m.server_eps ** 0.5:.4g} (√ε) makes it FedAvg's (a run at η = 1 diverged, README)")
