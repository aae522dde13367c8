"""Floe's on-device inference cost per generated token against the SLM's own forward pass, and the privacy
detector's time per prompt, measured in the same run (issue 12: router + fusion ≤ 1.3× the SLM; detector
< 1 ms per prompt).

    python benchmarks/floe_inference.py                  # tiny-llama-s SLM, 5 experts of rank 64, 16 tokens
    python benchmarks/floe_inference.py --experts 3 --rank 16 --prompts 20

Every decoding step reads the whole sequence, as fedlab's fusion does (no key/value cache), in each row:
- SLM: the base SLM's next-token distribution (the baseline);
- Floe, unmerged (`method.router_merge: false`): the routed SLM as one LoRA of rank M·r, plus the fusion
  gate's MLP on (P_SLM, P_LLM); the router (prompt embedding by the router's sentence encoder, gate,
  mixture) once per prompt, spread over its tokens;
- Floe, merged (`method.router_merge` null or true, what the tables run): W + Σ_j ω_j ΔW_j folded into the
  weights once per prompt from the experts' precomputed dense deltas (`MergedMixture`), then the plain
  forward plus the gate's MLP;
- the same through PEFT's merge_adapter / unmerge_adapter on the rank-M·r mixture (the former merged path).
The cloud LLM's forward is not on the device (it runs in parallel in the cloud) and is reported apart."""
from __future__ import annotations

import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import table  # noqa: E402


def per_token(fn, tokens: int) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) / tokens


def bench_fusion(args) -> list[list]:
    from fedlab.config import load_config
    from fedlab.data.tasks import task_examples
    from fedlab.methods.floe.fusion import FusionGate, next_probs_ids
    from fedlab.methods.floe.inference import make_embedder
    from fedlab.methods.floe.merged import MergedMixture
    from fedlab.methods.floe.router import gate, mixture_state
    from fedlab.models.zoo import load_model
    from fedlab.runtime.resident import get_resident
    from fedlab.transforms import set_state, transform
    from fedlab.transforms.lora import lora_rank_axes

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    cfg = load_config("experiments/floe/base.yaml", [f"model.name={args.model}"])
    s, r, m = cfg.method.lora_scale, args.rank, args.experts
    single = get_resident(cfg, chain=(transform("lora", r=r, alpha=s * r),))
    mixed = get_resident(cfg, chain=(transform("lora", r=m * r, alpha=s * m * r),))
    axes = lora_rank_axes(single.model)
    centres = [{k: 0.02 * torch.randn_like(v) for k, v in single.init_state.items()} for _ in range(m)]
    embed = make_embedder(args.encoder or cfg.method.router_encoder, single, cfg.model.max_length)
    experts = torch.nn.functional.normalize(torch.randn(m, embed(["a prompt"]).shape[-1]), dim=-1)
    llm, _ = load_model(args.llm)
    vocab = len(mixed.tokenizer)
    fgate = FusionGate(vocab).eval()
    prompts = [e.prompt for t in ("describe", "food", "friend") for e in task_examples(t, "test", args.prompts)]
    prompts = prompts[: args.prompts]
    model, tok = mixed.model.eval(), mixed.tokenizer
    ids = [tok(p, add_special_tokens=False)["input_ids"] for p in prompts]
    n = args.tokens
    times = {"slm": 0.0, "unmerged": 0.0, "merged": 0.0, "router": 0.0, "merge": 0.0, "gate": 0.0, "llm": 0.0,
             "peft": 0.0, "peft_merge": 0.0, "load": 0.0}
    merger = MergedMixture(model, centres)

    def decode(start: list[int], key: str) -> None:
        seq = list(start)
        for _ in range(n):
            t0 = time.perf_counter()
            p = next_probs_ids(model, seq, cfg.model.max_length)
            times[key] += time.perf_counter() - t0
            if key != "slm":
                t0 = time.perf_counter()
                p_llm = next_probs_ids(llm, seq, cfg.model.max_length)
                times["llm"] += time.perf_counter() - t0
                t0 = time.perf_counter()
                with torch.no_grad():
                    w = fgate(p[None], p_llm[None])
                    p = w[:, None] * p[None] + (1 - w[:, None]) * p_llm[None]
                times["gate"] += time.perf_counter() - t0
                p = p[0]
            seq.append(int(p.argmax()))

    with torch.no_grad():
        decode(ids[0], "slm")                   # warm-up of both paths
        decode(ids[0], "unmerged")
        times.update({k: 0.0 for k in times})
        for prompt, start in zip(prompts, ids):
            with model.disable_adapter():
                decode(start, "slm")
            merger.unmerge()
            t0 = time.perf_counter()
            w = gate(embed([prompt]), experts)[0]
            times["router"] += time.perf_counter() - t0
            t0 = time.perf_counter()
            set_state(model, mixture_state(centres, w, axes))
            times["load"] += time.perf_counter() - t0
            decode(start, "unmerged")
            t0 = time.perf_counter()
            model.merge_adapter()
            times["peft_merge"] += time.perf_counter() - t0
            decode(start, "peft")
            t0 = time.perf_counter()
            model.unmerge_adapter()
            times["peft_merge"] += time.perf_counter() - t0
            t0 = time.perf_counter()
            merger.merge(w)
            times["merge"] += time.perf_counter() - t0
            decode(start, "merged")
            t0 = time.perf_counter()
            merger.unmerge()
            times["merge"] += time.perf_counter() - t0
    tokens = n * len(prompts)
    ms = {k: 1000 * v / tokens for k, v in times.items()}
    gate_ms = ms["gate"] / 3                    # the gate ran in the three Floe rows
    unmerged = ms["unmerged"] + gate_ms + ms["router"] + ms["load"]
    merged = ms["merged"] + gate_ms + ms["router"] + ms["merge"]
    peft = ms["peft"] + gate_ms + ms["router"] + ms["load"] + ms["peft_merge"]
    return [["SLM alone (baseline)", ms["slm"], 1.0, "-"],
            [f"Floe, unmerged LoRA of rank {m}·{r}", unmerged, unmerged / ms["slm"],
             f"forward {ms['unmerged']:.2f} + gate {gate_ms:.3f} + router {ms['router']:.3f} + load {ms['load']:.3f}"],
            ["Floe, mixture merged per prompt (as run)", merged, merged / ms["slm"],
             f"forward {ms['merged']:.2f} + gate {gate_ms:.3f} + router {ms['router']:.3f} + merge {ms['merge']:.3f}"],
            ["Floe, merged through PEFT's merge_adapter", peft, peft / ms["slm"],
             f"forward {ms['peft']:.2f} + gate {gate_ms:.3f} + router {ms['router']:.3f} + load {ms['load']:.3f} + "
             f"merge {ms['peft_merge']:.3f}"],
            ["cloud LLM forward (not on the device)", ms["llm"] / 3, ms["llm"] / 3 / ms["slm"], args.llm]]


def bench_detector(args) -> list[list]:
    from fedlab.data.privacy_prompts import privacy_prompts
    from fedlab.privacy.detector import PrivacyDetector

    prompts = [p.text for p in privacy_prompts("test", seed=0)]
    rows = []
    det = PrivacyDetector()
    best = min(per_token(lambda: [det.detect(p) for p in prompts], len(prompts)) for _ in range(3))
    rows.append(["stage 1 (regular expressions, keywords)", len(prompts), 1000 * best])
    try:
        from fedlab.models.zoo import load_encoder

        enc, tok = load_encoder("minilm-l6")
    except Exception as e:      # not installed: say so, measure what is there
        rows.append([f"stage 2 (minilm-l6): not measured ({type(e).__name__})", 0, float("nan")])
        return rows
    torch.set_num_threads(args.threads)
    for pooling, label in (("contextual", "stages 1 + 2 (minilm-l6 on the prompts stage 1 passes)"),
                           ("static", "stages 1 + 2 (minilm-l6's static word embeddings)")):
        det2 = PrivacyDetector.fit(enc, tok, privacy_prompts("validation", seed=0), pooling=pooling)
        best = min(per_token(lambda d=det2: [d.detect(p) for p in prompts], len(prompts)) for _ in range(2))
        rows.append([label, len(prompts), 1000 * best])
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="tiny-llama-s")
    ap.add_argument("--llm", default="tiny-llama")
    ap.add_argument("--experts", type=int, default=5)
    ap.add_argument("--rank", type=int, default=64)
    ap.add_argument("--prompts", type=int, default=12)
    ap.add_argument("--tokens", type=int, default=16)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--encoder", default=None, help="the router's prompt encoder (default: experiments/floe/"
                                                    "base.yaml's method.router_encoder)")
    args = ap.parse_args()
    from fedlab.config import load_config
    from fedlab.methods.floe.inference import router_encoder_name

    encoder = router_encoder_name(args.encoder or load_config("experiments/floe/base.yaml").method.router_encoder)
    print(f"## Router + fusion per generated token ({args.model}, {args.experts} experts of rank {args.rank}, "
          f"{args.prompts} prompts × {args.tokens} tokens, {args.threads} thread, router encoder {encoder})\n")
    print(table(bench_fusion(args), ["path", "ms per token", "× SLM", "breakdown (ms)"]))
    print("\n## Privacy detector per prompt\n")
    print(table(bench_detector(args), ["detector", "prompts", "ms per prompt"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
