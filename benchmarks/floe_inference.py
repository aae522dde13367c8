"""Floe's on-device inference cost per generated token against the SLM's own forward pass, and the privacy
detector's time per prompt, measured in the same run (targets: router + fusion ≤ 1.3× the SLM; detector
< 1 ms per prompt).

    python benchmarks/floe_inference.py                  # tiny-llama-s SLM, 5 experts of rank 64, 16 tokens
    python benchmarks/floe_inference.py --experts 3 --rank 16 --prompts 20

Each row decodes greedily; the uncached rows read the whole sequence at every step, as fedlab's scorer and
fusion do, the cached rows keep the key/value cache as a deployment would (the deployed comparison is
the cached Floe row against the cached SLM). Every ratio is the mean over `--repeats` passes (each pass times
every path on the same prompts, interleaved) ± its 95 % interval. Rows:
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
from _common import Report, table  # noqa: E402


def per_token(fn, tokens: int) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) / tokens


def bench_fusion(args) -> list[list]:
    from fedlab.config import load_config
    from fedlab.data.tasks import task_examples
    from fedlab.methods.floe.fusion import FusionGate, mix, next_probs_ids
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
                    p = mix(w, p[None], p_llm[None])
                times["gate"] += time.perf_counter() - t0
                p = p[0]
            seq.append(int(p.argmax()))

    def decode_cached(start: list[int], key: str, fuse: bool) -> None:
        """Greedy decoding with the key/value cache, as a deployment runs it: the prompt once, then one token per
        step; with `fuse`, the fusion gate on (P_SLM, P_LLM) at every step (the LLM's forward timed apart)."""
        seq = list(start)
        t0 = time.perf_counter()
        out = model(input_ids=torch.tensor([seq]), use_cache=True)
        times[key] += time.perf_counter() - t0
        for _ in range(n):
            p = torch.softmax(out.logits[0, -1].float(), -1)
            if fuse:
                t0 = time.perf_counter()
                p_llm = next_probs_ids(llm, seq, cfg.model.max_length)
                times["llm_cached"] += time.perf_counter() - t0
                t0 = time.perf_counter()
                w = fgate(p[None], p_llm[None])
                p = mix(w, p[None], p_llm[None])[0]
                times["gate_cached"] += time.perf_counter() - t0
            seq.append(int(p.argmax()))
            t0 = time.perf_counter()
            out = model(input_ids=torch.tensor([[seq[-1]]]), past_key_values=out.past_key_values, use_cache=True)
            times[key] += time.perf_counter() - t0

    def one_pass() -> dict:
        for k in times:
            times[k] = 0.0
        for prompt, start in zip(prompts, ids):
            with model.disable_adapter():
                decode(start, "slm")
                decode_cached(start, "slm_cached", fuse=False)
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
            with model.disable_adapter():          # the mixture is folded into the base weights: no LoRA pass
                decode_cached(start, "merged_cached", fuse=True)
            t0 = time.perf_counter()
            merger.unmerge()
            times["merge"] += time.perf_counter() - t0
        tokens = n * len(prompts)
        return {k: 1000 * v / tokens for k, v in times.items()}

    times.update({"slm_cached": 0.0, "merged_cached": 0.0, "llm_cached": 0.0, "gate_cached": 0.0})
    with torch.no_grad():
        decode(ids[0], "slm")                   # warm-up of both paths
        decode(ids[0], "unmerged")
        with model.disable_adapter():
            decode_cached(ids[0], "slm_cached", fuse=False)
        passes = [one_pass() for _ in range(args.repeats)]
    return summarize(passes, args, m, r)


def summarize(passes: list[dict], args, m: int, r: int) -> list[list]:
    """Mean ms per token over the passes and each path's ratio to its baseline, mean ± 95 % interval over the
    passes (each pass measures every path on the same prompts, interleaved)."""
    from fedlab.evidence.stats import mean_ci

    def row(label, total, base, detail):
        ratios = [total(ms) / ms[base] for ms in passes]
        mean, half = mean_ci(ratios)
        value = sum(total(ms) for ms in passes) / len(passes)
        return [label, value, f"{mean:.2f} ± {half:.2f}" if len(passes) > 1 else f"{mean:.2f}", base, detail(passes[0])]

    gate_ms = lambda ms: ms["gate"] / 3                      # noqa: E731  the gate ran in the three uncached Floe rows
    unmerged = lambda ms: ms["unmerged"] + gate_ms(ms) + ms["router"] + ms["load"]   # noqa: E731
    merged = lambda ms: ms["merged"] + gate_ms(ms) + ms["router"] + ms["merge"]      # noqa: E731
    peft = lambda ms: ms["peft"] + gate_ms(ms) + ms["router"] + ms["load"] + ms["peft_merge"]   # noqa: E731
    cached = lambda ms: ms["merged_cached"] + ms["gate_cached"] + ms["router"] + ms["merge"]   # noqa: E731
    return [
        row("SLM alone, no cache (fedlab's scorer)", lambda ms: ms["slm"], "slm", lambda ms: "-"),
        row("SLM alone, key/value cache (a deployment)", lambda ms: ms["slm_cached"], "slm_cached", lambda ms: "-"),
        row(f"Floe, unmerged LoRA of rank {m}·{r}, no cache", unmerged, "slm",
            lambda ms: f"forward {ms['unmerged']:.2f} + gate {gate_ms(ms):.3f} + router {ms['router']:.3f} + load {ms['load']:.3f}"),
        row("Floe, mixture merged per prompt, no cache (as the tables run)", merged, "slm",
            lambda ms: f"forward {ms['merged']:.2f} + gate {gate_ms(ms):.3f} + router {ms['router']:.3f} + merge {ms['merge']:.3f}"),
        row("Floe, merged through PEFT's merge_adapter, no cache", peft, "slm",
            lambda ms: f"forward {ms['peft']:.2f} + router {ms['router']:.3f} + merge {ms['peft_merge']:.3f}"),
        row("Floe, mixture merged per prompt, key/value cache (deployed)", cached, "slm_cached",
            lambda ms: f"forward {ms['merged_cached']:.2f} + gate {ms['gate_cached']:.3f} + router {ms['router']:.3f} + "
                       f"merge {ms['merge']:.3f}"),
        row("cloud LLM forward (not on the device)", lambda ms: ms["llm"] / 3, "slm", lambda ms: args.llm)]


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
    ap.add_argument("--repeats", type=int, default=5, help="passes over the prompts; ratios get a 95 %% interval")
    ap.add_argument("--encoder", default=None, help="the router's prompt encoder (default: experiments/floe/"
                                                    "base.yaml's method.router_encoder)")
    ap.add_argument("--out", default=None, help="also write the report as a generated Markdown page (e.g. "
                    "benchmarks/results/floe_inference.md)")
    args = ap.parse_args()
    report = Report("benchmarks/floe_inference.py")
    from fedlab.config import load_config
    from fedlab.methods.floe.inference import router_encoder_name

    encoder = router_encoder_name(args.encoder or load_config("experiments/floe/base.yaml").method.router_encoder)
    report.emit(f"## Router + fusion per generated token ({args.model}, {args.experts} experts of rank {args.rank}, "
                f"{args.prompts} prompts × {args.tokens} tokens, {args.threads} thread, router encoder {encoder})\n")
    report.emit(table(bench_fusion(args), ["path", "ms per token", f"× baseline (mean ± 95 %, {args.repeats} passes)",
                                           "baseline", "breakdown of one pass (ms)"]))
    report.emit("\n## Privacy detector per prompt\n")
    report.emit(table(bench_detector(args), ["detector", "prompts", "ms per prompt"]))
    if args.out:
        report.write(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
