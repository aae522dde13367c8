"""Config of `floe` and its ablations (light: imported by config validation)."""
from dataclasses import dataclass, field
from typing import ClassVar, Optional

from fedlab.validation import MethodConfig, check, choose


@dataclass(frozen=True)
class DeviceClass:
    """A simulated device class (SPEC §4.3; fedlab.hetero.devices says how memory and speed are used)."""
    name: str = "orin-nano"
    share: float = 1.0          # relative number of clients of this class
    memory: float = 0.3         # budget on the profile's memory range: M(r_min) + memory·(M(r_max) − M(r_min))
    speed: float = 0.4          # step-time divisor (1.0: the machine the profile was measured on)


# the paper's Table I: Jetson Orin Nano 8 GB (speed 0.4) and Orin NX 16 GB (speed 1.0), 10 Nano : 5 NX
ORIN_CLASSES = (DeviceClass("orin-nano", 2.0, 0.3, 0.4), DeviceClass("orin-nx", 1.0, 1.2, 1.0))


@dataclass(frozen=True)
class FloeConfig(MethodConfig):
    """Floe's fine-tuning phase (paper 003, SPEC.md §4.1, §4.3): model.name is the devices' SLM."""
    name: str = "floe"

    # resource-aware ranks (Algorithm 1)
    ranks: tuple[int, ...] = (4, 8, 16, 32, 64)     # R_set
    lora_scale: float = 2.0          # α = lora_scale · r, so ΔW = s·BA means the same at every rank
    rank_selection: bool = True      # False (Floe^-M): every client at r_max; those that do not fit sit out
    devices: tuple[DeviceClass, ...] = field(default_factory=lambda: ORIN_CLASSES)
    background_load: float = 0.3     # a round's load u ~ U(0, this) takes u of the memory range, speed·(1 − u/2)
    deadline: Optional[float] = None     # simulated seconds per round; null: the midpoint rule (README)
    # a profile JSON to use instead of measuring this machine (in a YAML: relative to the YAML's folder)
    profile: Optional[str] = field(default=None, metadata={"input_path": True})
    # synchronous (deadline-based, the paper's protocol) or asynchronous (Eq. 5, our extra mode)
    mode: str = "sync"
    async_beta: Optional[float] = None   # β of exp(−β·τ), τ in simulated seconds; null: ln 2 / T (one deadline late weighs ½)
    async_max_lag: float = 3.0       # async: a device trains only at a rank whose latency is ≤ this many deadlines
    # clustered aggregation (Eq. 4)
    cluster: bool = True             # False (Floe^-P): one cluster
    max_clusters: int = 10
    min_silhouette: float = 0.25     # below it: one cluster
    experts: Optional[int] = None    # a fixed number of clusters M (Fig. 14's sweep); null: the silhouette choice
    probe_per_task: int = 8          # public samples per task for the behaviour embeddings
    # inference: the parameter-free router over the expert pool (Eq. 9–11), scored at the end of the run
    router: bool = True
    # the sentence encoder of prompts and experts (the paper's BGE): auto — minilm-l6 when its package is
    # installed, else the zoo's tiny-bert | a named encoder (minilm-l6, tiny-bert, a BERT folder) | slm — the
    # base SLM's own mean hidden state (no extra model on the device)
    router_encoder: str = "auto"
    router_k: int = 32               # public samples per expert embedding
    router_temperature: float = 1.0  # 1: no temperature (SPEC §4.3)
    router_kind: str = "free"        # free: Eq. 9–11's cosine gate | dense: a trained linear gate (LLM-FedMoE)
    router_top: Optional[int] = None     # keep each gate's top-k experts, renormalised; null: all of them
    # fold each prompt's mixture into the weights (one plain forward per token, merged.py): null — yes when
    # combine=fusion and the M dense expert deltas fit in router_merge_max_mb; true / false force it
    router_merge: Optional[bool] = None
    router_merge_max_mb: float = 2048.0
    router_epochs: int = 30          # dense gate: epochs over the public samples
    router_lr: float = 0.05
    # inference: LLM–SLM logit fusion (Eq. 12–15); null llm: no fusion
    llm: Optional[str] = None        # the cloud LLM (zero-shot), e.g. tiny-llama
    combine: str = "fusion"          # fusion: the learned gate (Eq. 12–15) | proxy: proxy tuning, LLM + SLM' − SLM
    fusion_features: str = "full"    # full: [P_SLM; P_LLM] | compact: max, entropy and overlap (ablation)
    fusion_positions: int = 2048     # public answer tokens the gate trains on, balanced over tasks (SPEC §4.3); every
                                     # 5th example of a task is read on top of them and held out for the NLL check
    fusion_epochs: int = 3
    fusion_lr: float = 1e-3
    fusion_rtt: float = 0.08         # simulated round-trip time to the cloud (s), ± fusion_rtt_jitter
    fusion_rtt_jitter: float = 0.04
    # the cloud LLM's compute per token (ms), simulated: a cloud GPU's time, not this machine's, so the fallback
    # (hence every fused score) does not depend on this machine's speed or load; null: measure the LLM here
    fusion_cloud_ms: Optional[float] = 5.0
    tau_wait: float = 0.2            # the LLM's token counts only when RTT + cloud time ≤ this (s)
    fusion_eval_per_task: Optional[int] = 50    # test items per task scored with fusion (null: all)
    detector_encoder: Optional[str] = None      # null: stage 1 only | a sentence encoder for stage 2 (minilm-l6)
    detector_tau: Optional[float] = None        # stage 2's cosine threshold; null: chosen for F1 on validation prompts
    # stage 2's embedding: contextual — the encoder's mean-pooled output; static — the mean of its input word
    # embeddings (no transformer layer: under 1 ms per prompt, the same F1 with MiniLM, experiments/floe/DETECTOR.md)
    detector_pooling: str = "contextual"
    # local DP (off by default): dpsgd — per-example clipping to C and N(0, σ²C²) on each batch's sum;
    # update — the round's update clipped to C plus N(0, σ²C²) once (a labelled variant)
    dp: str = "none"
    dp_clip: float = 1.0             # C
    dp_noise: float = 1.0            # σ, the noise multiplier
    dp_delta: float = 1e-5           # δ of the reported ε

    def validate(self, p):
        check(len(self.ranks) >= 1 and all(isinstance(r, int) and r >= 1 for r in self.ranks), f"{p}.ranks",
              self.ranks, "a non-empty list of integers >= 1")
        check(self.lora_scale > 0, f"{p}.lora_scale", self.lora_scale, "a number > 0")
        check(len(self.devices) >= 1, f"{p}.devices", self.devices, "at least one device class")
        for i, d in enumerate(self.devices):
            check(d.share > 0, f"{p}.devices[{i}].share", d.share, "a number > 0")
            check(d.speed > 0, f"{p}.devices[{i}].speed", d.speed, "a number > 0")
        check(0 <= self.background_load < 1, f"{p}.background_load", self.background_load, "a number in [0, 1)")
        check(self.deadline is None or self.deadline > 0, f"{p}.deadline", self.deadline, "null or seconds > 0")
        choose(self.mode, ["sync", "async"], f"{p}.mode")
        check(self.async_beta is None or self.async_beta >= 0, f"{p}.async_beta", self.async_beta, "null or >= 0")
        check(self.async_max_lag >= 1, f"{p}.async_max_lag", self.async_max_lag, "a number of deadlines >= 1")
        check(self.max_clusters >= 2, f"{p}.max_clusters", self.max_clusters, "an integer >= 2")
        check(-1 <= self.min_silhouette <= 1, f"{p}.min_silhouette", self.min_silhouette, "a number in [-1, 1]")
        check(self.experts is None or self.experts >= 1, f"{p}.experts", self.experts, "null or an integer >= 1")
        check(self.probe_per_task >= 1, f"{p}.probe_per_task", self.probe_per_task, "an integer >= 1")
        check(self.router_k >= 1, f"{p}.router_k", self.router_k, "an integer >= 1")
        check(self.router_temperature > 0, f"{p}.router_temperature", self.router_temperature, "a number > 0")
        choose(self.router_kind, ["free", "dense"], f"{p}.router_kind")
        check(self.router_top is None or self.router_top >= 1, f"{p}.router_top", self.router_top,
              "null or an integer >= 1")
        check(self.router_epochs >= 1, f"{p}.router_epochs", self.router_epochs, "an integer >= 1")
        check(self.router_lr > 0, f"{p}.router_lr", self.router_lr, "a number > 0")
        choose(self.combine, ["fusion", "proxy"], f"{p}.combine")
        check(not (self.router_merge is True and self.combine == "proxy"), f"{p}.router_merge", self.router_merge,
              "null or false with method.combine=proxy (proxy tuning needs the unmerged base SLM beside the routed one)")
        check(self.router_merge_max_mb >= 0, f"{p}.router_merge_max_mb", self.router_merge_max_mb, "MiB >= 0")
        check(bool(self.router_encoder), f"{p}.router_encoder", self.router_encoder,
              "auto, slm, or an encoder name (minilm-l6, tiny-bert, a BERT folder)")
        check(self.combine != "proxy" or bool(self.llm), f"{p}.llm", self.llm,
              "a model sharing model.name's tokenizer (method.combine=proxy adds logits token by token)")
        check(self.detector_tau is None or -1 <= self.detector_tau <= 1, f"{p}.detector_tau", self.detector_tau,
              "null or a cosine in [-1, 1]")
        check(self.detector_tau is None or bool(self.detector_encoder), f"{p}.detector_tau", self.detector_tau,
              "null unless method.detector_encoder names the stage-2 sentence encoder it thresholds")
        choose(self.detector_pooling, ["contextual", "static"], f"{p}.detector_pooling")
        check(self.detector_pooling == "contextual" or bool(self.detector_encoder), f"{p}.detector_pooling",
              self.detector_pooling, "contextual unless method.detector_encoder names the stage-2 encoder it pools")
        choose(self.fusion_features, ["full", "compact"], f"{p}.fusion_features")
        check(self.fusion_positions >= 1, f"{p}.fusion_positions", self.fusion_positions, "an integer >= 1")
        check(self.fusion_epochs >= 1, f"{p}.fusion_epochs", self.fusion_epochs, "an integer >= 1")
        check(self.tau_wait > 0, f"{p}.tau_wait", self.tau_wait, "seconds > 0")
        check(self.fusion_rtt >= 0 and 0 <= self.fusion_rtt_jitter <= self.fusion_rtt, f"{p}.fusion_rtt_jitter",
              self.fusion_rtt_jitter, "a jitter in [0, fusion_rtt]")
        check(self.fusion_cloud_ms is None or self.fusion_cloud_ms >= 0, f"{p}.fusion_cloud_ms", self.fusion_cloud_ms,
              "null (measured) or milliseconds >= 0")
        choose(self.dp, ["none", "dpsgd", "update"], f"{p}.dp")
        check(self.dp_clip > 0, f"{p}.dp_clip", self.dp_clip, "a norm > 0")
        check(self.dp_noise >= 0, f"{p}.dp_noise", self.dp_noise, "a noise multiplier >= 0")
        check(0 < self.dp_delta < 1, f"{p}.dp_delta", self.dp_delta, "a number in (0, 1)")

    def check_experiment(self, cfg):
        if self.cluster or self.router:
            check(cfg.data.public_count() >= 1, "data.public_size", cfg.data.public_size,
                  "a public set of at least one sample (Floe embeds each client's LoRA by its hidden-state "
                  "shift on public probes); set data.public_fraction or data.public_size")


@dataclass(frozen=True)
class FloeNoRankConfig(FloeConfig):
    """Ablation Floe^-M: no rank selection — every client trains at r_max; those that do not fit drop out."""
    name: str = "floe_no_rank"
    rank_selection: bool = False
    fixed: ClassVar[tuple[str, ...]] = ("rank_selection",)
    general: ClassVar[str] = "floe"


@dataclass(frozen=True)
class FloeNoClusterConfig(FloeConfig):
    """Ablation Floe^-P: one cluster (uniform average of every update, ranks padded)."""
    name: str = "floe_no_cluster"
    cluster: bool = False
    fixed: ClassVar[tuple[str, ...]] = ("cluster",)
    general: ClassVar[str] = "floe"


@dataclass(frozen=True)
class LLMFedMoEConfig(FloeConfig):
    """Floe's LLM-FedMoE baseline (paper 003 §V, baseline 7): Floe's fine-tuning phase and expert pool; at
    inference a trainable dense router (a linear gate on the prompt's embedding, trained on the public samples)
    keeps the top-3 experts, and the cloud LLM is proxy-tuned by the routed SLM (LLM + SLM' − SLM)."""
    name: str = "llm_fedmoe"
    router_kind: str = "dense"
    router_top: Optional[int] = 3
    combine: str = "proxy"
    llm: Optional[str] = "tiny-llama"
    fixed: ClassVar[tuple[str, ...]] = ("router_kind", "combine")
    general: ClassVar[str] = "floe"
