"""Config of `floe` and its ablations (light: imported by config validation)."""
from dataclasses import dataclass
from typing import ClassVar, Optional

from fedlab.validation import METHOD_NAME_HELP, MethodConfig, check, choose, doc


@dataclass(frozen=True)
class DeviceClass:
    """A simulated device class (fedlab.methods.floe.devices says how memory and speed are used)."""
    name: str = doc("orin-nano", "the device class's name (in messages)")
    share: float = doc(1.0, "relative number of clients of this class")
    memory: float = doc(0.3, "memory budget on the profile's memory range: M(r_min) + memory·(M(r_max) − M(r_min))")
    speed: float = doc(0.4, "step-time divisor (1.0: the machine the profile was measured on)")


# the paper's Table I: Jetson Orin Nano 8 GB (speed 0.4) and Orin NX 16 GB (speed 1.0), 10 Nano : 5 NX
ORIN_CLASSES = (DeviceClass("orin-nano", 2.0, 0.3, 0.4), DeviceClass("orin-nx", 1.0, 1.2, 1.0))


@dataclass(frozen=True)
class FloeConfig(MethodConfig):
    """Floe's fine-tuning phase (paper 003): model.name is the devices' SLM."""
    name: str = doc("floe", METHOD_NAME_HELP)

    # resource-aware ranks (Algorithm 1)
    ranks: tuple[int, ...] = doc((4, 8, 16, 32, 64), "R_set, the LoRA ranks a client may train at")
    lora_scale: float = doc(2.0, "α = lora_scale · r, so ΔW = s·BA means the same at every rank")
    rank_selection: bool = doc(True, "false (Floe^-M): every client at r_max; those that do not fit sit out")
    devices: tuple[DeviceClass, ...] = doc(help="the simulated device classes (name, share, memory, speed); default: "
                                                "the paper's Jetson Orin Nano and Orin NX, 2 : 1",
                                           factory=lambda: ORIN_CLASSES)
    background_load: float = doc(0.3, "a round's load u ~ U(0, this) takes u of the memory range, speed·(1 − u/2)")
    deadline: Optional[float] = doc(None, "simulated seconds per round; null: the midpoint rule (Floe README)")
    profile: Optional[str] = doc(None, "a profile JSON to use instead of measuring this machine (in a YAML: relative "
                                       "to the YAML's folder)", input_path=True)
    mode: str = doc("sync", "sync (deadline-based, the paper's protocol) | async (paper Eq. 5, fedlab's extra mode)")
    async_beta: Optional[float] = doc(None, "β of exp(−β·τ), τ in simulated seconds; null: ln 2 / T (one deadline "
                                            "late weighs ½)")
    async_max_lag: float = doc(3.0, "async: a device trains only at a rank whose latency is ≤ this many deadlines")
    # clustered aggregation (Eq. 4)
    cluster: bool = doc(True, "clustered aggregation (paper Eq. 4); false (Floe^-P): one cluster")
    max_clusters: int = doc(10, "the silhouette choice tries M = 2 .. min(max_clusters, N − 1) clusters")
    min_silhouette: float = doc(0.25, "below this best silhouette: one cluster")
    experts: Optional[int] = doc(None, "a fixed number of clusters M (Fig. 14's sweep); null: the silhouette choice")
    probe_per_task: int = doc(8, "public samples per task for the behaviour embeddings")
    router: bool = doc(True, "inference: the parameter-free router over the expert pool (paper Eq. 9–11), scored at "
                             "the end of the run")
    router_encoder: str = doc(
        "auto", "the sentence encoder of prompts and experts (the paper's BGE): auto — minilm-l6 when its package "
                "is installed, else the zoo's tiny-bert | a named encoder (minilm-l6, tiny-bert, a BERT folder) | "
                "slm — the base SLM's own mean hidden state (no extra model on the device)")
    router_k: int = doc(32, "public samples per expert embedding")
    router_temperature: float = doc(1.0, "temperature of the router's softmax over cosines (1: no temperature)")
    router_kind: str = doc("free", "free: Eq. 9–11's cosine gate | dense: a trained linear gate (LLM-FedMoE)")
    router_top: Optional[int] = doc(None, "keep each gate's top-k experts, renormalised; null: all of them")
    router_merge: Optional[bool] = doc(
        None, "fold each prompt's mixture into the weights (one plain forward per token, merged.py): null — yes "
              "when combine=fusion and the M dense expert deltas fit in router_merge_max_mb; true / false force it")
    router_merge_max_mb: float = doc(2048.0, "router_merge null: merge only when the dense expert deltas fit in this "
                                             "many MiB")
    router_epochs: int = doc(30, "dense gate: epochs over the public samples")
    router_lr: float = doc(0.05, "dense gate: Adam learning rate")
    # inference: LLM–SLM logit fusion (Eq. 12–15); null llm: no fusion
    llm: Optional[str] = doc(None, "the cloud LLM (zero-shot) for LLM–SLM logit fusion, e.g. tiny-llama; null: no "
                                   "fusion")
    combine: str = doc("fusion", "fusion: the learned gate (paper Eq. 12–15) | proxy: proxy tuning, LLM + SLM' − SLM")
    fusion_features: str = doc("full", "the gate's input: full ([P_SLM; P_LLM]) | compact (max, entropy and overlap; "
                                       "ablation)")
    fusion_positions: int = doc(
        2048, "public answer tokens the fusion gate trains on, balanced over tasks; every 5th example of a task is "
              "read on top of them and held out for the NLL check")
    fusion_epochs: int = doc(3, "epochs of the fusion gate's training")
    fusion_lr: float = doc(1e-3, "learning rate of the fusion gate")
    fusion_rtt: float = doc(0.08, "simulated round-trip time to the cloud (s), ± fusion_rtt_jitter")
    fusion_rtt_jitter: float = doc(0.04, "half-width (s) of the seeded jitter on fusion_rtt")
    fusion_cloud_ms: Optional[float] = doc(
        5.0, "the cloud LLM's compute per token (ms), simulated: a cloud GPU's time, not this machine's, so the "
             "fallback (hence every fused score) does not depend on this machine's speed or load; null: measure the "
             "LLM here")
    tau_wait: float = doc(0.2, "the LLM's token counts only when RTT + cloud time ≤ this (s)")
    fusion_eval_per_task: Optional[int] = doc(50, "test items per task scored with fusion (null: all)")
    detector_encoder: Optional[str] = doc(None, "privacy detector: null — stage 1 only | a sentence encoder for "
                                                "stage 2 (minilm-l6)")
    detector_tau: Optional[float] = doc(None, "stage 2's cosine threshold; null: chosen for F1 on validation prompts")
    detector_pooling: str = doc(
        "contextual", "stage 2's embedding: contextual — the encoder's mean-pooled output | static — the mean of its "
                      "input word embeddings (no transformer layer: under 1 ms per prompt, the same F1 with MiniLM, "
                      "experiments/floe/DETECTOR.md)")
    dp: str = doc("none", "local DP (off by default): none | dpsgd — per-example clipping to C and N(0, σ²C²) on each "
                          "batch's sum | update — the round's update clipped to C plus N(0, σ²C²) once (a labelled "
                          "variant)")
    dp_clip: float = doc(1.0, "C, the clipping norm of local DP")
    dp_noise: float = doc(1.0, "σ, the noise multiplier of local DP")
    dp_delta: float = doc(1e-5, "δ of the reported ε")

    def plan_roles(self, cfg):
        """The roles `fedlab plan` sizes (fedlab/methods/floe/plan.py)."""
        from fedlab.methods.floe.plan import roles

        return roles(cfg)

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
    name: str = doc("floe_no_rank", METHOD_NAME_HELP)
    rank_selection: bool = doc(False, "false: every client at r_max; those that do not fit sit out (fixed for this "
                                      "ablation)")
    fixed: ClassVar[tuple[str, ...]] = ("rank_selection",)
    general: ClassVar[str] = "floe"


@dataclass(frozen=True)
class FloeNoClusterConfig(FloeConfig):
    """Ablation Floe^-P: one cluster (uniform average of every update, ranks padded)."""
    name: str = doc("floe_no_cluster", METHOD_NAME_HELP)
    cluster: bool = doc(False, "false: one cluster, a uniform average of every update (fixed for this ablation)")
    fixed: ClassVar[tuple[str, ...]] = ("cluster",)
    general: ClassVar[str] = "floe"


@dataclass(frozen=True)
class LLMFedMoEConfig(FloeConfig):
    """Floe's LLM-FedMoE baseline (paper 003 §V, baseline 7): Floe's fine-tuning phase and expert pool; at
    inference a trainable dense router (a linear gate on the prompt's embedding, trained on the public samples)
    keeps the top-3 experts, and the cloud LLM is proxy-tuned by the routed SLM (LLM + SLM' − SLM)."""
    name: str = doc("llm_fedmoe", METHOD_NAME_HELP)
    router_kind: str = doc("dense", "free: Eq. 9–11's cosine gate | dense: a trained linear gate (LLM-FedMoE); fixed at dense here")
    router_top: Optional[int] = doc(3, "keep each gate's top-k experts, renormalised (LLM-FedMoE: 3); null: all of "
                                       "them")
    combine: str = doc("proxy", "proxy: the cloud LLM proxy-tuned by the routed SLM, LLM + SLM' − SLM (fixed here)")
    llm: Optional[str] = doc("tiny-llama", "the cloud LLM, proxy-tuned by the routed SLM; must share model.name's "
                                           "tokenizer")
    fixed: ClassVar[tuple[str, ...]] = ("router_kind", "combine")
    general: ClassVar[str] = "floe"
