"""ELSA (paper 002), a method that owns its round.

Before round 1 (`begin`):
  1. every client warms up the whole model locally and sends the pooled embeddings of the public probe texts
     (`fingerprint: predictions`: the head's log-probabilities on them);
  2. the cloud fits a Gaussian fingerprint per client, R̂ = symmetric KL / D (`divergence: paired`: the symmetric
     KL of the clients' predictions probe by probe), trust w_n (log domain, `fedlab.methods.elsa.trust`), places
     clients and edges (`fedlab.methods.elsa.topology`) and groups the clients under the edges
     (`fedlab.methods.elsa.grouping`: exclusion, spectral clustering, matching, repair);
  3. the topology plot and the trust of every client are logged; with mislabeled clients in the data, the
     precision and recall of the low-trust exclusion, and how the trust and each of its two terms alone rank
     the mislabeled clients (recall@m, AUC).
Global round g:
  1. each edge k receives θ₂ of θ_{g−1} for its members; each member receives [θ₁, θ₃, head] of θ_{g−1} and
     trains ϱ split steps with its edge (activations and gradients sketched; uplink SS-OP-rotated);
  2. each edge averages its group by |D_n| (θ_{g,k});
  3. the cloud: θ_g = Σ_k α̃_k θ_{g,k} with α_k = w̄_k/(1 + R̄_k) (or by data sizes), optionally through
     AMSGrad on the update (FedAMS); the run stops once ‖θ_g − θ_{g−1}‖ ≤ ξ;
  4. logged: measured link bytes, their time at each client's bandwidth plus two round trips a step, Eq.
     14–15's model of them, the uplink's reconstruction cosine, Δθ.
Evaluation scores the split path as deployed (`acc/…`) with the whole model beside it (`full/acc/…`).
The baselines are the same round with other `grouping`, `aggregation`, `server_opt`, `prox_mu`, `ratio` and
`ssop_rank` (README); Simple SL (`grouping: single`) is classic split learning: one θ₂ on the cloud that the
clients train in turn, no edges."""
from __future__ import annotations

import uuid

import numpy as np
import torch

from fedlab.comm.messages import EvalIns, FitIns
from fedlab.eval.summary import summarize_eval
from fedlab.methods.base import FedMethod
from fedlab.methods.elsa.aggregate import cloud_weights, state_distance, weighted_average
from fedlab.methods.elsa.chains import client_chain, full_chain, middle_chain, model_dims, split_of
from fedlab.methods.elsa.client import split_steps
from fedlab.methods.elsa.comm_model import client_seconds, round_bytes, round_seconds
from fedlab.methods.elsa.config import server_step_warning
from fedlab.methods.elsa.edge import EdgeHandle, link_codec, start_edges, stop_edges
from fedlab.methods.elsa.fedcada import from_wire, to_wire
from fedlab.methods.elsa.grouping import Grouping, group_clients
from fedlab.methods.elsa.topology import cloud_round_trips_ms, place
from fedlab.methods.elsa.trust import divergence_matrix, paired_divergence_matrix, relative_trust, trust_terms
from fedlab.runtime.context import log_line
from fedlab.runtime.resident import get_resident
from fedlab.seeding import derive_seed


class Elsa(FedMethod):
    per_client_metrics = ("loss/task", "time/fit", "link/bytes_up")
    progress_metrics = {"acc": "acc/mean", "task-loss": "loss/task", "Δθ": "server/delta",
                        "link-MB": "server/link_mb"}

    @staticmethod
    def preflight(cfg, data) -> None:
        """What the config alone cannot tell (one ConfigError line, before anything is written): an encoder
        model, p + q + o = its blocks, r < D, no more edges than clients, some client within τ_max of an
        edge, classification tasks only."""
        from fedlab.config import ConfigError
        from fedlab.models.zoo import is_encoder

        m = cfg.method
        if not is_encoder(cfg.model.name):
            raise ConfigError(f"model.name: {cfg.model.name!r} is not an encoder; elsa fine-tunes a BERT-family "
                              "encoder (pico-bert, tiny-bert, minilm-l6 or a BERT folder)")
        if list(cfg.model.lora.target_modules or []) == ["all-linear"]:
            raise ConfigError("model.lora.target_modules: [all-linear] cannot be limited to one party's blocks; elsa "
                              "puts LoRA on the attention of each part: set e.g. [query, value] or null (the "
                              "encoder's default attention projections)")
        blocks, dim = model_dims(cfg.model.name)
        if m.split is not None and sum(m.split) != blocks:
            raise ConfigError(f"method.split: {list(m.split)} sums to {sum(m.split)}, but {cfg.model.name} has "
                              f"{blocks} blocks; p + q + o must equal {blocks}")
        if m.ssop_rank >= dim:
            raise ConfigError(f"method.ssop_rank: {m.ssop_rank} is not allowed; expected 0 (no SS-OP) or a rank "
                              f"below the hidden size D = {dim} of {cfg.model.name}")
        if m.num_edges > data.num_clients:
            raise ConfigError(f"method.num_edges: {m.num_edges} edges for {data.num_clients} clients; expected at "
                              f"most data.num_clients")
        topo = place(data.num_clients, m.num_edges, derive_seed(cfg.seed, "elsa-topology"), m.area_km, m.area_km,
                     tau_max_ms=m.tau_max_ms)
        if m.grouping != "single" and not topo.feasible.any():
            raise ConfigError(f"method.tau_max_ms: {m.tau_max_ms} leaves every client without a feasible edge "
                              f"(the shortest round trip is {topo.latency_ms.min():.0f} ms)")
        generative = sorted({e.task for part in data.train for e in part if not e.choices})
        if generative:
            raise ConfigError(f"data.tasks: elsa classifies; {generative} have no classes (use classification or "
                              "multiple-choice tasks)")

    # ------------------------------------------------------------------ lifecycle
    def setup(self) -> None:
        cfg, m = self.cfg, self.cfg.method
        full = get_resident(cfg, chain=full_chain(cfg))
        self.global_state = {k: v.clone() for k, v in full.init_state.items()}
        self.client_keys = tuple(get_resident(cfg, chain=client_chain(cfg)).spec.communicated)
        self.middle_keys = tuple(get_resident(cfg, chain=middle_chain(cfg)).spec.communicated)
        n = self.data.num_clients
        self.topology = place(n, m.num_edges, derive_seed(cfg.seed, "elsa-topology"), m.area_km, m.area_km,
                              tau_max_ms=m.tau_max_ms)
        rng = np.random.default_rng(derive_seed(cfg.seed, "elsa-bandwidth"))
        self.bandwidth = rng.uniform(*m.bandwidth_mbps, n) * 1e6 / 8            # bytes/s per client
        self.cloud_rtt_ms = cloud_round_trips_ms(self.topology.clients, m.area_km, m.cloud_km,
                                                 derive_seed(cfg.seed, "elsa-cloud"))
        self.trust = np.ones(n)
        self.trust_terms: dict[str, np.ndarray] = {}    # each term of log trust alone (higher: more trusted)
        self.divergence = np.zeros((n, n))
        self.grouping: Grouping | None = None
        self.server = {"m": None, "v": None, "vhat": None}
        self.link_seconds = 0.0
        self.stopped = False
        self.moments = None            # FedCAda: the federation's Adam moments (client_opt: fedcada)
        self.edge_names: list[str] = []
        if (warning := server_step_warning(m)) is not None:
            log_line(warning)

    def _ensure_edges(self) -> None:
        if not self.edge_names:
            tag = uuid.uuid4().hex[:10]
            self.edge_names = [f"fedlab-elsa-{tag}-edge{k}" for k in range(self.cfg.method.num_edges)]
            start_edges(self.cfg, self.edge_names)

    def begin(self, ctx) -> None:
        m = self.cfg.method
        warm = ctx.fit({cid: FitIns(0, self.global_state, {"mode": "warmup"}) for cid in ctx.clients})
        if m.grouping == "trust":
            if len(warm) < len(ctx.clients):
                raise RuntimeError(f"elsa: {len(ctx.clients) - len(warm)} clients failed the warm-up; trust needs "
                                   "every client's fingerprint")
            emb = [warm[c].aux["probe"] for c in ctx.clients]
            div = (paired_divergence_matrix(emb, m.divergence_scale) if m.divergence == "paired"
                   else divergence_matrix(emb, m.divergence_scale, m.shrinkage))
            self.divergence = div.numpy()
            conf, others = trust_terms(emb, div, "entropy" if m.fingerprint == "predictions" else "inverse_norm")
            self.trust_terms = {"confidence": (-conf).numpy(), "divergence": (-others).numpy()}
            self.trust = relative_trust(-conf - others).numpy()
        self.grouping = self.make_grouping(0)
        ctx.log(self.trust_metrics(), prefix="server/")
        self.log_topology(ctx)

    def make_grouping(self, rnd: int) -> Grouping:
        m, topo = self.cfg.method, self.topology
        feasible = topo.feasible
        n = len(feasible)
        if m.grouping == "trust":
            return group_clients(self.trust, self.divergence, topo.latency_ms, feasible, m.w_excl, m.w_min,
                                 m.gamma, derive_seed(self.cfg.seed, "elsa-spectral"))
        excluded = {c: "no feasible edge" for c in range(n) if not feasible[c].any()}
        ok = [c for c in range(n) if c not in excluded]
        groups: dict[int, list[int]] = {}
        if m.grouping == "single":       # Simple SL: the middle part on the cloud, one group, no latency bound
            return Grouping({0: list(range(n))}, {})
        if m.grouping == "nearest":
            for c in ok:
                k = int(np.argmin(np.where(feasible[c], topo.latency_ms[c], np.inf)))
                groups.setdefault(k, []).append(c)
        else:                            # random: half the feasible clients, each at a random feasible edge
            rng = np.random.default_rng(derive_seed(self.cfg.seed, "elsa-random", rnd))
            chosen = sorted(rng.choice(ok, size=max(1, len(ok) // 2), replace=False).tolist()) if ok else []
            for c in chosen:
                k = int(rng.choice(np.flatnonzero(feasible[c])))
                groups.setdefault(k, []).append(c)
        return Grouping({k: sorted(v) for k, v in sorted(groups.items())}, excluded)

    # ------------------------------------------------------------------ the round
    def run_round(self, rnd: int, ctx) -> None:
        m = self.cfg.method
        self._ensure_edges()
        grouping = self.make_grouping(rnd) if m.grouping == "random" else self.grouping
        sizes = self.data.sizes()
        middle = {k: self.global_state[k] for k in self.middle_keys}
        front_back = {k: self.global_state[k] for k in self.client_keys}
        instructions = {}
        fedcada = m.client_opt == "fedcada"
        down = self.moments_for(self.middle_keys) if fedcada else None
        up = self.moments_for(self.client_keys) if fedcada else None
        single = m.grouping == "single"
        for k, members in grouping.groups.items():
            EdgeHandle(self.edge_names[k]).start(rnd, middle, members, down, single)
            for c in members:
                instructions[c] = FitIns(rnd, front_back, {"mode": "split", "edge": self.edge_names[k]},
                                         to_wire(up) if up else None)
        if single:     # Simple SL: the clients train the cloud's one θ₂ in turn (client order: their ids)
            results = {}
            for c, ins in sorted(instructions.items()):
                results.update(ctx.fit({c: ins}))
        else:
            results = ctx.fit(dict(sorted(instructions.items())))
        edge_states, edge_members, edge_moments = {}, {}, {}
        for k, members in grouping.groups.items():
            done = [c for c in members if c in results]
            if done:
                got = EdgeHandle(self.edge_names[k]).aggregate(
                    {c: results[c].state for c in done}, {c: sizes[c] for c in done},
                    {c: from_wire(results[c].aux) for c in done} if fedcada else None)
                edge_states[k], edge_moments[k] = got if fedcada else (got, None)
                edge_members[k] = done
        if not edge_states:
            raise RuntimeError(f"elsa round {rnd}: no client of any edge answered")
        if m.aggregation == "trust":
            alpha = cloud_weights(edge_members, self.trust, self.divergence)
        else:
            alpha = {k: float(sum(sizes[c] for c in ms)) for k, ms in edge_members.items()}
        ks = sorted(edge_states)
        averaged = weighted_average([edge_states[k] for k in ks], [alpha[k] for k in ks])
        if fedcada:                 # the federation's moments: averaged as the parameters are
            from fedlab.methods.elsa.fedcada import average_moments

            self.moments = average_moments([edge_moments[k] for k in ks], [alpha[k] for k in ks])
        new = self.server_step(averaged)
        delta = state_distance(new, self.global_state)
        self.global_state = new
        self.stopped = m.xi > 0 and delta <= m.xi
        ctx.log({"delta": delta, "edges": len(ks), "clients": len(results),
                 **{f"alpha_edge_{k}": alpha[k] / sum(alpha.values()) for k in ks},
                 **self.comm_metrics(results, len(ks), grouping)}, prefix="server/")

    def moments_for(self, keys) -> dict | None:
        """FedCAda: the federation's moments of `keys` (None before the first split round: Adam from zero)."""
        if self.moments is None:
            return None
        keys = [k for k in keys if k in self.moments["m"]]
        return {"m": {k: self.moments["m"][k] for k in keys}, "v": {k: self.moments["v"][k] for k in keys},
                "k": self.moments["k"]}

    def server_step(self, averaged: dict) -> dict:
        """θ_g = the average (server_opt none); θ_{g−1} + η m̂/√v̂ with AMSGrad on Δ = average − θ_{g−1}
        (amsgrad, FedAMS: v̂ = max(v̂, v, ε)); θ_{g−1} + η m with m = β₁ m + Δ (momentum, FedAvgM,
        Hsu et al. 2019: η = 1, β₁ = 0 is plain FedAvg)."""
        m = self.cfg.method
        if m.server_opt == "none":
            return averaged
        b1, b2 = m.server_betas
        out = {}
        s = self.server
        if m.server_opt == "momentum":
            if s["m"] is None:
                s["m"] = {k: torch.zeros_like(v, dtype=torch.float32) for k, v in averaged.items()}
            for k, v in averaged.items():
                s["m"][k] = b1 * s["m"][k] + (v.float() - self.global_state[k].float())
                out[k] = (self.global_state[k].float() + m.server_lr * s["m"][k]).to(v.dtype)
            return out
        for key in ("m", "v", "vhat"):
            if s[key] is None:
                s[key] = {k: torch.zeros_like(v, dtype=torch.float32) for k, v in averaged.items()}
        for k, v in averaged.items():
            d = v.float() - self.global_state[k].float()
            s["m"][k] = b1 * s["m"][k] + (1 - b1) * d
            s["v"][k] = b2 * s["v"][k] + (1 - b2) * d * d
            s["vhat"][k] = torch.maximum(torch.maximum(s["vhat"][k], s["v"][k]), torch.full_like(d, m.server_eps))
            out[k] = (self.global_state[k].float() + m.server_lr * s["m"][k] / s["vhat"][k].sqrt()).to(v.dtype)
        return out

    def rtt_ms(self, cid: int, edge: int) -> float:
        """The round trip of client `cid` to the party that runs its middle blocks: its edge, or the cloud
        (Simple SL)."""
        if self.cfg.method.grouping == "single":
            return float(self.cloud_rtt_ms[cid])
        return float(self.topology.latency_ms[cid, edge])

    def evaluate(self, rnd: int, ctx) -> dict:
        """The split path as deployed (`acc/…`, the reported accuracy) and the whole uncompressed model
        (`full/acc/…`), summarised alike; the mean reconstruction cosine of the uplink (`link/cosine`)."""
        got = ctx.evaluate(self.configure_evaluate(rnd, ctx.clients))
        out = summarize_eval(got)
        whole = {c: type(r)(r.cid, r.round, {k[5:]: v for k, v in r.metrics.items() if k.startswith("full/")}
                            | {k: v for k, v in r.metrics.items() if k.startswith("n/")})
                 for c, r in got.items() if hasattr(r, "metrics")}
        out.update({f"full/{k}": v for k, v in summarize_eval(whole).items()})
        cos = [r.metrics["link/cosine"] for r in got.values() if hasattr(r, "metrics") and "link/cosine" in r.metrics]
        if cos:
            out["link/cosine"] = sum(cos) / len(cos)
        return out

    def comm_metrics(self, results: dict, num_edges: int, grouping: Grouping) -> dict:
        """Measured bytes on the client–edge links and the time they take at each client's bandwidth, plus
        two round trips per step (the forward and the backward exchange), beside Eq. 14–15's model of the
        transfer (μ = model.max_length, ρ the link's achieved ratio, the client's actual steps)."""
        m = self.cfg.method
        _, dim = model_dims(self.cfg.model.name)
        ratio = link_codec(self.cfg, 0, dim).ratio
        link = {c: r.metrics.get("link/bytes_up", 0.0) + r.metrics.get("link/bytes_down", 0.0)
                for c, r in results.items()}
        adapters = sum(sum(v.numel() * v.element_size() for v in r.state.values()) for r in results.values())
        # FedCAda: each client's Adam moments (m and v of its parameters) go up beside its state
        adapters += sum(sum(t.numel() * t.element_size() for n, t in r.aux.items() if n != "k")
                        for r in results.values() if r.aux and self.cfg.method.client_opt == "fedcada")
        steps = {c: r.metrics.get("link/steps", 0.0) for c, r in results.items()}
        rtt = {c: self.rtt_ms(c, k) for k, ms in grouping.groups.items() for c in ms}
        latency = {c: 2 * steps[c] * rtt.get(c, 0.0) / 1000 for c in results}
        sequential = m.grouping == "single"      # Simple SL: the clients take the cloud's θ₂ in turn
        seconds = round_seconds([link[c] / self.bandwidth[c] + latency[c] for c in link], sequential)
        self.link_seconds += seconds
        batches = [r.metrics.get("link/batch", 0.0) for r in results.values()]
        lora = sum(v.numel() for v in self.global_state.values())
        sizes = self.data.sizes()
        model_s = round_seconds([client_seconds(r.metrics.get("link/batch", 0.0),
                                                split_steps(m, sizes[c], self.cfg.federation.batch_size),
                                                self.cfg.model.max_length, dim, ratio, self.bandwidth[c])
                                 for c, r in results.items()], sequential)
        cos = [r.metrics["link/cosine"] for r in results.values() if "link/cosine" in r.metrics]
        return {"link_bytes": sum(link.values()), "link_mb": sum(link.values()) / 1e6, "adapter_bytes": adapters,
                "link_seconds": seconds, "link_seconds_total": self.link_seconds,
                "link_latency_seconds": round_seconds(list(latency.values()), sequential),
                **({"link_cosine": sum(cos) / len(cos)} if cos else {}),
                "eq14_bytes": round_bytes(batches, max(steps.values(), default=0.0), self.cfg.model.max_length,
                                          dim, ratio, lora, num_edges),
                "eq15_seconds": model_s, "sketch_ratio": ratio}

    def should_stop(self, rnd: int) -> bool:
        return self.stopped

    # ------------------------------------------------------------------ reporting
    def trust_metrics(self) -> dict:
        g = self.grouping
        out = {f"trust_client_{c}": float(w) for c, w in enumerate(self.trust)}
        out.update({"groups": len(g.groups), "excluded": len(g.excluded), "moved": len(g.moved),
                    "merged": len(g.merged)})
        bad = set(self.data.mislabeled)
        if self.cfg.method.grouping == "trust":
            out["trust/spearman_entropy"] = trust_entropy_spearman(self.trust, self.data.train)
        if bad and self.cfg.method.grouping == "trust":
            flagged = {c for c, why in g.excluded.items() if why == "low trust"}
            hit = len(flagged & bad)
            out["trust/flagged"] = len(flagged)
            if flagged:                   # precision is undefined when nothing is flagged: no value, not 0
                out["trust/precision"] = hit / len(flagged)
            out["trust/recall"] = hit / len(bad)
            out.update(rank_metrics(self.trust, bad))
            for term, score in self.trust_terms.items():     # which of the two terms ranks them low
                out.update({f"{k}_{term}": v for k, v in rank_metrics(score, bad).items()})
        return out

    def log_topology(self, ctx) -> None:
        from fedlab.plots import elsa_topology

        g = self.grouping
        path = ctx.out_dir / "elsa_topology.png"
        elsa_topology(self.topology.clients, self.topology.edges, g.groups, g.excluded, self.trust, path,
                      mislabeled=tuple(self.data.mislabeled))
        ctx.log_artifact(path, "figures")
        line = "; ".join(f"edge {k}: {ms}" for k, ms in g.groups.items())
        why = ", ".join(f"{c} ({w})" for c, w in sorted(g.excluded.items())) or "none"
        p, q, o = split_of(self.cfg)
        log_line(f"[fedlab] elsa: split {p}/{q}/{o}; groups {line}; excluded {why}")

    # ------------------------------------------------------------------ evaluation, end, checkpoints
    def configure_evaluate(self, rnd: int, cids: list[int]) -> dict:
        return {c: EvalIns(rnd, self.global_state, {"mode": "eval"}) for c in cids}

    def check_upload(self, res):
        if res.state is None:
            return None if res.aux is not None else "no state"
        bad = sorted(set(res.state) - set(self.client_keys))
        return f"unexpected keys {bad[:2]}" if bad else None

    def finalize(self, ctx) -> dict:
        if self.edge_names:
            stop_edges(self.cfg, self.edge_names)
            self.edge_names = []
        return {}

    def export_extras(self, to, run) -> list[str]:
        """The whole trained model, its parts joined and merged, as an encoder folder and its head
        (`fedlab.methods.elsa.export`)."""
        from fedlab.methods.elsa.export import write_merged

        return write_merged(self, to)

    def state_dict(self) -> dict:
        g = self.grouping
        return {"global_state": self.global_state, "trust": self.trust, "divergence": self.divergence,
                "grouping": None if g is None else (g.groups, g.excluded, g.moved, g.merged),
                "server": self.server, "link_seconds": self.link_seconds, "stopped": self.stopped,
                "moments": self.moments}

    def load_state_dict(self, state: dict) -> None:
        self.global_state = state["global_state"]
        self.trust, self.divergence = state["trust"], state["divergence"]
        self.grouping = None if state["grouping"] is None else Grouping(*state["grouping"])
        self.server, self.link_seconds, self.stopped = state["server"], state["link_seconds"], state["stopped"]
        self.moments = state.get("moments")


def label_entropy(part) -> float:
    """H = −Σ_c p_c log p_c of a client's (task, answer) classes, in nats."""
    from fedlab.data.federated import class_counts

    counts = np.array(class_counts(part), dtype=float)
    p = counts / counts.sum()
    return float(-(p * np.log(p)).sum())


def trust_entropy_spearman(trust, train) -> float:
    """Spearman's ρ between the clients' trust and their label entropy (does trust
    rank clients by how mixed their classes are rather than by label noise?); nan when either is constant."""
    from scipy.stats import spearmanr

    ent = [label_entropy(p) for p in train]
    if np.ptp(trust) == 0 or np.ptp(ent) == 0:
        return float("nan")
    return float(spearmanr(trust, ent).statistic)


def rank_metrics(score, bad: set[int]) -> dict:
    """How a per-client score (higher: more trusted) ranks the m mislabeled clients `bad`: recall@m — the share
    of them among the m lowest — and the rank AUC P(score of a mislabeled client < score of a clean one)
    (chance 0.5; 1: every mislabeled client below every clean one; no AUC when no client is clean)."""
    score = np.asarray(score)
    lowest = set(np.argsort(score)[:len(bad)].tolist())
    out = {"trust/recall_at_m": len(lowest & bad) / len(bad)}
    clean = [c for c in range(len(score)) if c not in bad]
    if clean:
        out["trust/auc_low"] = float(np.mean([score[b] < score[c] for b in bad for c in clean]))
    return out
