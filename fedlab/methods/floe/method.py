"""Floe's fine-tuning phase (paper 003), a method that owns its round:

  1. every sampled device draws this round's background load and picks its LoRA rank with Algorithm 1
     (`fedlab.hetero.select_rank`) from the measured profile — or sits the round out (logged);
  2. it receives its cluster centre's first r_i components and trains at rank r_i (α = s·r_i);
  3. the server pads each update to r_max, embeds it by behaviour (hidden-state shift on public probes) and
     parameters, clusters the updates (k-means, silhouette-chosen M) and averages within each cluster,
     component j over the members that have it (Eq. 4): the cluster centres are the expert pool;
  4. every device evaluates its cluster's expert.

Logged per round: each client's rank (`rank_client_<id>`, 0 = sat out), its free memory and predicted latency,
the simulated round time, the clusters and their silhouette; the profile as an artifact."""
from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass

import torch

from fedlab.clustering import choose_clusters, fixed_clusters
from fedlab.comm.messages import EvalIns, FitIns
from fedlab.hetero import aggregate_lora_states, pad_rank, select_rank, take_rank
from fedlab.methods.base import FedMethod
from fedlab.methods.floe.behaviour import behaviour_embedding, mean_hidden, probe_sets
from fedlab.methods.floe.devices import assign_classes, round_conditions
from fedlab.methods.floe.export import save_gate, save_router
from fedlab.methods.floe.profile import load_profile, measured_profile
from fedlab.models.modes import eval_mode
from fedlab.privacy import PrivacyLedger
from fedlab.runtime.context import log_line
from fedlab.runtime.resident import get_resident
from fedlab.transforms import chain_to_wire, set_state, transform
from fedlab.transforms.lora import lora_rank_axes
from fedlab.validation import ConfigError


@dataclass
class Update:
    """One device's update at its own rank (`state`) and padded to r_max (`padded`, for the embeddings), the
    state it started from (padded: its expert's first `rank` components), the whole expert it came from, and its
    simulated start and arrival."""
    cid: int
    rank: int
    state: dict
    padded: dict
    start_state: dict
    expert: dict
    start: float
    arrival: float


class Floe(FedMethod):
    per_client_metrics = ("loss/task", "time/fit")
    progress_metrics = {"acc": "acc/mean", "task-loss": "loss/task", "rank": "rank/mean", "clusters": "server/clusters/num"}
    # the inference phase's models beside the devices' own (a column shows where the run has its metrics)
    table_columns = (("final", "routed/", "routed SLM"), ("final", "fused/", "Floe (SLM + LLM fused)"),
                     ("final", "proxy/", "LLM proxy-tuned by the routed SLM"))

    # ------------------------------------------------------------------ models
    def chain(self, r: int) -> tuple:
        return (transform("lora", r=int(r), alpha=self.cfg.method.lora_scale * int(r)),)

    def resident_at(self, r: int):
        return get_resident(self.cfg, chain=self.chain(r))

    @property
    def resident(self):
        return self.resident_at(self.r_max)

    @staticmethod
    def preflight(cfg, data) -> None:
        """A pinned profile (`method.profile`) is read before anything is written: a missing, damaged or
        misshapen file, or one without an entry for every rank of `method.ranks`, is one ConfigError line."""
        m = cfg.method
        if m.profile:
            prof = load_profile(m.profile)
            missing = [r for r in m.ranks if r not in prof.memory_mb]
            if missing:
                raise ConfigError(f"method.profile: {m.profile} has no entry for ranks {missing} of method.ranks "
                                  f"{list(m.ranks)}; profile those ranks with `fedlab profile CONFIG --out FILE`")

    def __init__(self, cfg, data):
        super().__init__(cfg, data)
        m = cfg.method
        self.ranks = sorted({int(r) for r in m.ranks})
        self.r_max = self.ranks[-1]
        self.classes = assign_classes(data.num_clients, m.devices, cfg.seed)
        self._profile = None
        self.check_feasible()
        from fedlab.methods.floe.inference import check_detector_encoder, check_router_encoder

        if m.router:
            check_router_encoder(m.router_encoder)
        check_detector_encoder(m.detector_encoder)
        if m.combine == "proxy":
            from fedlab.methods.llm_fedavg.method import check_shared_tokenizer

            check_shared_tokenizer(m.llm, cfg.model.name)

    def check_feasible(self) -> None:
        """Before anything is written: every device class with clients fits some rank when unloaded (its whole
        memory budget, full speed) within the deadline — else one line naming the class."""
        from fedlab.config import ConfigError

        m = self.cfg.method
        if not m.rank_selection:        # Floe^-M: the devices that cannot fit r_max sit out by design
            return
        prof, T = self.profile(), self.deadline() * (m.async_max_lag if m.mode == "async" else 1.0)
        lo, hi = prof.memory(self.ranks[0]), prof.memory(self.r_max)
        for i, cls in enumerate(m.devices):
            steps = [self.steps(c) for c in range(self.data.num_clients) if self.classes[c] is cls]
            if not steps:
                continue
            budget = lo + cls.memory * (hi - lo)
            fewest = min(steps)
            lat = lambda r, n=fewest, speed=cls.speed: n * prof.step(r) / speed
            if not any(prof.memory(r) <= budget and lat(r) <= T for r in self.ranks):
                r = self.ranks[0]
                raise ConfigError(
                    f"method.devices[{i}]: class {cls.name!r} fits no rank of method.ranks {list(self.ranks)} even "
                    f"unloaded: r = {r} needs {prof.memory(r):.1f} MB of its {budget:.1f} MB and {lat(r):.3g} s of "
                    f"the {T:.3g} s deadline (method.deadline); raise its memory or speed, or the deadline")

    def setup(self) -> None:
        m = self.cfg.method
        res = self.resident
        self.axes = lora_rank_axes(res.model)
        self.global_state = {k: v.clone() for k, v in res.init_state.items()}
        self.centres = [{k: v.clone() for k, v in res.init_state.items()}]     # the expert pool
        self.assignment = [0] * self.data.num_clients                          # each client's expert
        self._base_hidden = None
        self.probes = probe_sets(self.data.public, m.probe_per_task) if m.cluster else {}
        self.ledger = PrivacyLedger()
        self.pending: list[Update] = []        # async: updates computed, not yet arrived (simulated time)
        self.clock = 0.0                       # simulated seconds since round 1 started
        self.rank_log: dict[int, dict[int, int]] = {}    # round -> client -> rank (0: sat out), for the plot

    # ------------------------------------------------------------------ the profile and the predictors
    def profile(self):
        if self._profile is None:
            m = self.cfg.method
            self._profile = (load_profile(m.profile) if m.profile else
                             measured_profile(self.cfg, self.cfg.model.name, self.ranks, m.lora_scale, log=log_line))
            missing = [r for r in self.ranks if r not in self._profile.memory_mb]
            if missing:
                raise ConfigError(f"method.profile: the profile has no entry for ranks {missing} of method.ranks")
        return self._profile

    def steps(self, cid: int) -> int:
        """Optimiser steps of one local fit (federation.local_steps when set, else the epochs' batches)."""
        fed = self.cfg.federation
        if fed.local_steps:
            return int(fed.local_steps)
        return math.ceil(len(self.data.train[cid]) / fed.batch_size) * fed.local_epochs

    def deadline(self) -> float:
        """T: method.deadline, or the midpoint rule — the slowest class at the median client's step count
        fits halfway between the smallest and the largest rank's latency, so (unloaded) it fits r_min and
        not r_max."""
        if self.cfg.method.deadline is not None:
            return float(self.cfg.method.deadline)
        prof = self.profile()
        steps = sorted(self.steps(c) for c in range(self.data.num_clients))[self.data.num_clients // 2]
        slowest = min(c.speed for c in self.cfg.method.devices)
        return steps * 0.5 * (prof.step(self.ranks[0]) + prof.step(self.r_max)) / slowest

    def begin(self, ctx) -> None:
        prof = self.profile()
        path = ctx.out_dir / "floe_profile.json"
        path.write_text(prof.to_json())
        ctx.log_artifact(path, "floe")
        classes = {c: cls.name for c, cls in enumerate(self.classes)}
        (ctx.out_dir / "floe_devices.json").write_text(json.dumps(classes, indent=1))
        ctx.log_artifact(ctx.out_dir / "floe_devices.json", "floe")
        ctx.log({"deadline_s": self.deadline()}, prefix="floe/")

    # ------------------------------------------------------------------ the round
    def choose_ranks(self, rnd: int, cids: list[int], ctx, limit: float | None = None) -> dict[int, tuple[int, float]]:
        """{client: (rank, predicted latency)} of the devices that train this round (Algorithm 1 with the latency
        bound `limit`, default the deadline); the others sit out (logged)."""
        m, prof = self.cfg.method, self.profile()
        T = self.deadline() if limit is None else limit
        lo, hi = prof.memory(self.ranks[0]), prof.memory(self.r_max)
        chosen, stats = {}, {}
        for cid in cids:
            cond = round_conditions(self.classes[cid], lo, hi, m.background_load, self.cfg.seed, rnd, cid)
            steps = self.steps(cid)

            def latency(r, steps=steps, cond=cond):
                return steps * prof.step(r) / cond.speed

            ranks = self.ranks if m.rank_selection else [self.r_max]
            r = select_rank(ranks, cond.free_memory, prof.memory, latency, T)
            stats[f"rank_client_{cid}"] = r or 0
            stats[f"free_memory_mb_client_{cid}"] = cond.free_memory
            if r is None:
                log_line(f"[fedlab] round {rnd}: client {cid} ({self.classes[cid].name}) sits out: no rank of "
                         f"{ranks} fits {cond.free_memory:.1f} MB and the {T:.2f} s latency bound")
                continue
            chosen[cid] = (r, latency(r))
            stats[f"latency_s_client_{cid}"] = latency(r)
        self.rank_log[rnd] = {c: (chosen[c][0] if c in chosen else 0) for c in cids}
        stats["clients/sat_out"] = len(cids) - len(chosen)
        stats["clients/trained"] = len(chosen)
        stats["rank/mean"] = sum(r for r, _ in chosen.values()) / len(chosen) if chosen else 0.0
        stats["time/simulated_round"] = max((t for _, t in chosen.values()), default=0.0)
        ctx.log(stats)
        return chosen

    def dispatch(self, rnd: int, chosen: dict, ctx, start_time: float = 0.0) -> list[Update]:
        """Train the chosen devices from their experts' first r_i components; their updates padded to r_max."""
        starts = {cid: self.centres[self.assignment[cid]] for cid in chosen}
        results = ctx.fit({cid: FitIns(rnd, take_rank(starts[cid], self.axes, r),
                                       {"transform": chain_to_wire(self.chain(r))}) for cid, (r, _) in chosen.items()})
        if results and self.cfg.method.dp != "none":
            ctx.log(self.account(sorted(results)))
        pad = lambda st: {k: pad_rank(v, self.axes[k], self.r_max) if k in self.axes else v for k, v in st.items()}
        return [Update(c, chosen[c][0], results[c].state, pad(results[c].state),
                       pad(take_rank(starts[c], self.axes, chosen[c][0])), starts[c], start_time,
                       start_time + chosen[c][1])
                for c in sorted(results)]

    def run_round(self, rnd: int, ctx) -> None:
        if self.cfg.method.mode == "async":
            return self.run_window(rnd, ctx)
        chosen = self.choose_ranks(rnd, ctx.sample(), ctx)
        self.clock += ctx.metrics["time/simulated_round"]
        ctx.log({"time/simulated_clock": self.clock})
        if not chosen:
            log_line(f"[fedlab] round {rnd}: every sampled client sat out; the experts stay as they were")
            return
        self.aggregate(self.dispatch(rnd, chosen, ctx), ctx, weighted=False)

    def run_window(self, rnd: int, ctx) -> None:
        """Asynchronous mode: round t is the simulated window [(t−1)T, tT). Idle devices start a job at the
        window's start (latency bound: async_max_lag·T); an update is aggregated at the end of the window it
        arrives in, weighted by exp(−β·τ_m) with τ_m = t_now − t_m^start its time since it started (Eq. 5; the
        weights are normalised within each cluster). Experts that no arrival came from are kept."""
        m, T = self.cfg.method, self.deadline()
        t0, t1 = (rnd - 1) * T, rnd * T
        busy = {u.cid for u in self.pending}
        idle = [c for c in ctx.sample() if c not in busy]
        chosen = self.choose_ranks(rnd, idle, ctx, limit=m.async_max_lag * T)
        if chosen:
            self.pending.extend(self.dispatch(rnd, chosen, ctx, start_time=t0))
        arrived = sorted((u for u in self.pending if u.arrival < t1), key=lambda u: u.arrival)
        self.pending = [u for u in self.pending if u.arrival >= t1]
        self.clock = t1
        ctx.log({"time/simulated_clock": self.clock, "async/arrived": len(arrived), "async/pending": len(self.pending),
                 "async/mean_staleness_s": sum(t1 - u.start for u in arrived) / len(arrived) if arrived else 0.0})
        if arrived:
            self.aggregate(arrived, ctx, weighted=True, now=t1)

    def beta(self) -> float:
        m = self.cfg.method
        return m.async_beta if m.async_beta is not None else math.log(2) / self.deadline()

    def aggregate(self, updates: list[Update], ctx, weighted: bool, now: float = 0.0) -> None:
        """Cluster the updates and average within each cluster (Eq. 4; Eq. 5's weights when `weighted`), each
        update at its own rank, components no member has kept from the members' start states."""
        cids = [u.cid for u in updates]
        by = {u.cid: u for u in updates}
        labels, info = self.cluster(cids, {c: by[c].padded for c in cids}, {c: by[c].start_state for c in cids})
        groups: dict[int, list[int]] = {}
        for c, g in zip(cids, labels):
            groups.setdefault(g, []).append(c)
        old, centres = self.centres, []
        for g in sorted(groups):
            members = groups[g]
            weights = None
            if weighted:
                stale = [now - by[c].start for c in members]
                raw = [math.exp(-self.beta() * t) for t in stale]
                weights = [x / sum(raw) for x in raw]
                info.update({f"async_weight_client_{c}": w for c, w in zip(members, weights)})
            fill = aggregate_lora_states([by[c].expert for c in members], self.axes)
            centres.append(aggregate_lora_states([by[c].state for c in members], self.axes, weights, fill=fill))
        # the experts whose devices all sat this round out (sync: rank selection or sampling left them out;
        # async: still training or idle) stay in the pool
        kept = sorted({self.assignment[c] for c in range(self.data.num_clients) if c not in by}
                      - {self.assignment[c] for c in cids})
        index = {j: len(centres) + i for i, j in enumerate(kept)}
        centres += [old[j] for j in kept]
        self.centres = centres
        for c, g in zip(cids, labels):
            self.assignment[c] = g
        for c in range(self.data.num_clients):           # those without an update
            if c in by:
                continue
            if self.assignment[c] in index:
                self.assignment[c] = index[self.assignment[c]]
            else:                                          # the closest new expert
                self.assignment[c] = self._closest(old[self.assignment[c]] if self.assignment[c] < len(old) else old[0])
        self.global_state = aggregate_lora_states([by[c].state for c in cids], self.axes,
                                                  fill=aggregate_lora_states([by[c].expert for c in cids], self.axes))
        info.update({f"cluster_client_{c}": self.assignment[c] for c in range(self.data.num_clients)})
        ctx.log(info, prefix="server/")

    def account(self, cids: list[int]) -> dict:
        """Record this round's releases of each client and report ε at δ (fedlab.privacy.accountant)."""
        m, fed = self.cfg.method, self.cfg.federation
        for c in cids:
            if m.dp == "dpsgd":
                self.ledger.record(c, m.dp_noise, min(1.0, fed.batch_size / len(self.data.train[c])), self.steps(c))
            else:        # each participation releases one noisy update; the server knows who took part
                self.ledger.record(c, m.dp_noise, 1.0, 1)
        eps = {c: self.ledger.epsilon(c, m.dp_delta) for c in range(self.data.num_clients)}
        return {**{f"dp/epsilon_client_{c}": e for c, e in eps.items()}, "dp/epsilon_max": max(eps.values())}

    def cluster(self, cids: list[int], padded: dict, starts: dict) -> tuple[list[int], dict]:
        """Cluster labels of the updates (`padded`, started from `starts`, both at r_max) and what to log."""
        m = self.cfg.method
        if not m.cluster or m.experts == 1 or len(cids) < (2 if m.experts else 3):
            return [0] * len(cids), {"clusters/num": 1}
        res = self.resident
        with eval_mode(res.model):           # in-process the clients just trained this resident: dropout off
            if self._base_hidden is None:
                set_state(res.model, res.init_state)       # B = 0: the base model's function
                self._base_hidden = mean_hidden(res.model, res.tokenizer, self.probes, self.cfg.model.max_length)
            emb = torch.stack([behaviour_embedding(res.model, res.tokenizer, self.probes, self.cfg.model.max_length,
                                                   padded[c], starts[c], self._base_hidden) for c in cids])
        out = (fixed_clusters(emb.numpy(), m.experts, seed=self.cfg.seed) if m.experts else
               choose_clusters(emb.numpy(), m.max_clusters, m.min_silhouette, seed=self.cfg.seed))
        info = {"clusters/num": out.num_clusters}
        if out.silhouette is not None:
            info["clusters/silhouette"] = out.silhouette
        return list(out.labels), info

    def _closest(self, state: dict) -> int:
        """The new expert most similar to `state` in what training changed: cosine of the differences from the
        LoRA initialisation (the shared random A would otherwise dominate the similarity)."""
        init = self.resident.init_state
        delta = lambda st: torch.cat([(st[k].float() - init[k].float()).reshape(-1) for k in init])
        ref = delta(state)
        sims = [float(torch.nn.functional.cosine_similarity(ref, delta(c), dim=0)) for c in self.centres]
        return max(range(len(sims)), key=sims.__getitem__)

    def check_upload(self, res) -> str | None:
        """An upload's keys are the global state's; each LoRA factor has a rank ≤ r_max on its rank axis."""
        ref = self.global_state
        if res.state is None:
            return None
        if set(res.state) != set(ref):
            return "wrong keys"
        for k, v in res.state.items():
            want = list(ref[k].shape)
            got = list(v.shape)
            if k in self.axes:
                ax = self.axes[k]
                if got[ax] > want[ax]:
                    return f"rank {got[ax]} of {k} exceeds r_max {want[ax]}"
                got[ax] = want[ax]
            if got != want:
                return f"wrong shape for {k}: {tuple(v.shape)}"
        return None

    # ------------------------------------------------------------------ evaluation: each client its expert
    def configure_evaluate(self, rnd, cids):
        cfg = {"transform": chain_to_wire(self.chain(self.r_max))}
        return {cid: EvalIns(rnd, self.centres[self.assignment[cid]],
                             {"tag": f"floe/{rnd}/expert{self.assignment[cid]}", **cfg}) for cid in cids}

    def finalize(self, ctx) -> dict:
        """The rank plot, then the inference phase's routed SLM on the shared test sets
        (`fedlab.methods.floe.inference`)."""
        m = self.cfg.method
        if self.rank_log:
            from fedlab.plots import rank_heatmap

            (ctx.out_dir / "plots").mkdir(parents=True, exist_ok=True)
            png = rank_heatmap(self.rank_log, self.data.num_clients, ctx.out_dir / "plots" / "floe_ranks.png",
                               {c: cls.name for c, cls in enumerate(self.classes)})
            ctx.log_artifact(png, "plots")
        if not m.router or not self.data.public:
            return {}
        from fedlab.methods.floe.inference import unmerge

        mixed = self.resident_at(self.r_max * len(self.centres))
        with eval_mode(self.resident.model, mixed.model):     # the inference phase: dropout off everywhere
            try:
                return self.infer(ctx, mixed)
            finally:          # whatever happened, the process's resident keeps no prompt's merged weights
                unmerge(mixed.model)

    def infer(self, ctx, mixed) -> dict:
        """The router over the expert pool, the routed SLM's scores, then fusion or proxy tuning with the LLM."""
        m = self.cfg.method
        from fedlab.methods.floe.inference import (
            Router,
            evaluate_routed,
            make_embedder,
            merge_routed,
            router_encoder_name,
        )

        res = self.resident
        encoder = router_encoder_name(m.router_encoder)
        embed = make_embedder(encoder, res, self.cfg.model.max_length)
        router = Router(self.centres, self.axes, embed, self.data.public, res.init_state, res,
                        self.cfg.model.max_length, m.router_k, m.router_temperature, m.router_top)
        trained = {}
        if m.router_kind == "dense":
            trained["router/mixture_nll"] = router.fit_dense(self.cfg, res, self.data.public, m.router_epochs,
                                                             m.router_lr)
        merge = merge_routed(m.router_merge, m.combine, mixed.model, len(self.centres), m.router_merge_max_mb)
        save_router(ctx.out_dir / "floe", router, encoder, m)
        ctx.tracker.set_tags({"floe.router_encoder": encoder, "floe.router_merge": str(merge).lower()})
        log_line(f"[fedlab] floe: router over {len(self.centres)} experts, prompts embedded by {encoder}, "
                 f"mixture {'merged into the weights' if merge else 'as a rank-M·r LoRA'} per prompt")
        out = {**trained, **evaluate_routed(router, mixed, self.data, self.cfg, merge), "routed/merged": float(merge)}
        out.update({f"routed/expert_domain_{j}": d for j, d in enumerate(router.domains)})
        if m.llm:
            out.update(self.fused(router, mixed, merge, ctx) if m.combine == "fusion"
                       else self.proxied(router, mixed, merge))
        return out

    def proxied(self, router, mixed, merge: bool) -> dict:
        """LLM-FedMoE: the cloud LLM proxy-tuned by the routed SLM, logits = LLM + SLM_routed − SLM_base, each
        test prompt with its own gate (`proxy/*`)."""
        from fedlab.methods.floe.inference import evaluate_routed
        from fedlab.methods.llm_fedavg.method import WithoutAdapter
        from fedlab.models.zoo import load_model
        from fedlab.transforms.fusion import ProxyTuned

        llm, llm_tok = load_model(self.cfg.method.llm)
        llm.eval()
        mixed.model.eval()
        proxy = ProxyTuned(llm, mixed.model, WithoutAdapter(mixed.model))
        return evaluate_routed(router, mixed, self.data, self.cfg, merge, scorer=(proxy, llm_tok), prefix="proxy")

    def fused(self, router, mixed, merge: bool, ctx=None) -> dict:
        """Train the fusion gate on public answers and score P_out on the test sets (`fusion.py`)."""
        import torch

        from fedlab.align.vocab import cached_vocab_map
        from fedlab.data.privacy_prompts import privacy_prompts
        from fedlab.methods.floe.fusion import (
            Fusion,
            FusionGate,
            evaluate_fused,
            gate_examples,
            held_out_check,
            split_held_out,
        )
        from fedlab.methods.floe.inference import load_mixture
        from fedlab.models.zoo import load_encoder, load_model
        from fedlab.objectives.training import make_trainer
        from fedlab.privacy.detector import PrivacyDetector, evaluate_detector
        from fedlab.seeding import seed_everything

        m, cfg = self.cfg.method, self.cfg
        llm, llm_tok = load_model(m.llm)
        llm.eval()
        vmap = torch.as_tensor(cached_vocab_map(llm_tok, mixed.tokenizer))
        loaded = {}

        def slm_for(prompt):
            if loaded.get("prompt") != prompt:
                load_mixture(mixed.model, router, router.gates([prompt])[0], merge)
                loaded["prompt"] = prompt
            return mixed.model, mixed.tokenizer

        if m.detector_encoder:
            enc, tok = load_encoder(m.detector_encoder)
            detector = PrivacyDetector.fit(enc, tok, privacy_prompts("validation", seed=cfg.seed),
                                           pooling=m.detector_pooling)
            if m.detector_tau is not None:
                detector.tau = float(m.detector_tau)
        else:
            detector = PrivacyDetector()
        flags: dict[str, bool] = {}
        flagged = lambda p: flags.setdefault(p, detector.detect(p).flagged)
        # the detector on held-out *templates* (privacy_prompts' test split: phrasings absent from the
        # validation templates it was fitted on), not only held-out fills
        on_templates = evaluate_detector(detector, privacy_prompts("test", seed=cfg.seed))
        detector_stats = {f"fused/detector_{k}": on_templates[k]
                          for k in ("precision", "recall", "f1", "flagged_stage2", "n")}
        ps, pl, ys, tasks, owners = gate_examples(slm_for, (llm, llm_tok), vmap, self.data.public, cfg.model.max_length,
                                                  m.fusion_positions)
        train, held = split_held_out(tasks, owners)
        if len(train) < m.fusion_positions:
            per_task = {t: tasks.count(t) for t in sorted(set(tasks))}
            print(f"[fedlab] Floe: the public set holds {len(train)} answer tokens to train the fusion gate on, below "
                  f"method.fusion_positions={m.fusion_positions} (default 2,048); the gate trains on what "
                  f"there is (positions read per task, held-out fifth included: {per_task})", file=sys.stderr)
        in_sample = len(held) == 0 or len(train) == 0
        if in_sample:                # too few examples to hold any out: the check runs on the training positions
            train = held = torch.arange(len(ys))
            print("[fedlab] Floe: too few public answers to hold any out; the fusion gate's NLL check runs on its "
                  "training positions (fused/heldout_in_sample = 1)", file=sys.stderr)
        seed_everything(cfg.seed)
        gate = FusionGate(ps.shape[-1], m.fusion_features, lr=m.fusion_lr)
        loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(ps[train], pl[train], ys[train]),
                                             batch_size=32, shuffle=True,
                                             generator=torch.Generator().manual_seed(cfg.seed))
        trainer = make_trainer(cfg, max_epochs=m.fusion_epochs, max_steps=0)
        trainer.fit(gate, loader)
        gate.eval()
        if ctx is not None:
            save_gate(ctx.out_dir / "floe", gate, m)
        fusion = Fusion(slm_for, (llm, llm_tok), gate, vmap, flagged, cfg.model.max_length, m.fusion_rtt,
                        m.fusion_rtt_jitter, m.tau_wait, seed=cfg.seed,
                        cloud_s=None if m.fusion_cloud_ms is None else m.fusion_cloud_ms / 1000)
        out = evaluate_fused(fusion, self.data, m.fusion_eval_per_task)
        out.update(detector_stats)
        out["fused/gate_train_nll"] = float(trainer.callback_metrics.get("fusion/nll", float("nan")))
        out["fused/gate_positions"] = len(train)
        check = held_out_check(gate, ps[held], pl[held], ys[held], [tasks[i] for i in held.tolist()])
        check["fused/heldout_in_sample"] = float(in_sample)
        out.update(check)
        if not check["fused/gate_check"]:
            print(f"[fedlab] Floe: the fusion gate's held-out NLL {check['fused/heldout_nll']:.3f} is above the better "
                  f"single model's ({min(check['fused/heldout_nll_slm'], check['fused/heldout_nll_llm']):.3f}): the "
                  "gate does not earn its keep at this budget", file=sys.stderr)
        if ctx is not None:
            self.fusion_figures(fusion, ctx)
        return out

    def fusion_figures(self, fusion, ctx) -> None:
        """Fig. 13 (the per-token w) and Fig. 16 (latency per token against the RTT, from this run's measured
        edge and cloud times) as plots, and the curve as JSON."""
        from fedlab.methods.floe.fusion import latency_curve
        from fedlab.plots import fusion_weights, latency_vs_rtt

        m = self.cfg.method
        out = ctx.out_dir / "plots"
        out.mkdir(parents=True, exist_ok=True)
        rtts = [i * m.tau_wait / 10 for i in range(21)]          # 0 .. 2·τ_wait
        curve = latency_curve(fusion.trace, rtts, m.tau_wait)
        (ctx.out_dir / "floe_latency_curve.json").write_text(json.dumps(curve, indent=1))
        ctx.log_artifact(ctx.out_dir / "floe_latency_curve.json", "floe")
        ctx.log_artifact(fusion_weights([t[3] for t in fusion.trace], out / "floe_fusion_weights.png"), "plots")
        ctx.log_artifact(latency_vs_rtt(curve, 1000 * m.tau_wait, out / "floe_latency_vs_rtt.png", 1000 * m.fusion_rtt),
                         "plots")

    def export_parties(self) -> list:
        """Each expert of the pool (a cluster centre: LoRA at r_max on the devices' SLM)."""
        from fedlab.export import Party

        return [Party(f"expert_{j}", self.resident, c) for j, c in enumerate(self.centres)]

    def export_extras(self, to, run) -> list[str]:
        """The router's and the fusion gate's files the run saved, and a README of how the parts combine."""
        from fedlab.methods.floe.export import write_extras

        return write_extras(self, to, run)

    def state_dict(self) -> dict:
        return {"global_state": self.global_state, "centres": self.centres, "assignment": self.assignment,
                "ledger": self.ledger.state_dict(), "clock": self.clock, "rank_log": self.rank_log,
                "pending": [vars(u).copy() for u in self.pending]}

    def load_state_dict(self, state: dict) -> None:
        self.global_state = state["global_state"]
        self.centres = state["centres"]
        self.assignment = list(state["assignment"])
        self.ledger.load_state_dict(state.get("ledger", {}))
        self.clock = float(state.get("clock", 0.0))
        self.rank_log = dict(state.get("rank_log", {}))
        self.pending = [Update(**u) for u in state.get("pending", [])]

    def final_adapters(self) -> dict | None:
        return self.global_state
