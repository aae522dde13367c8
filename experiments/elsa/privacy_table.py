"""ELSA's Table 4 at embedded scale (paper 002): what an honest-but-curious edge reads from the
activations a client sends — direct, Gaussian noise (σ = 0.25), sketch only, SS-OP + sketch (r = 8, 16) at
ρ ∈ {2.1, 4.2, 8.4} — as the cosine and MSE between H and what the edge sees, and the accuracy of a
nearest-neighbour token-identification attack against the input embedding table.

    python experiments/elsa/privacy_table.py                 # seeds 0,1,2 → results_privacy.json, PRIVACY.md
    python experiments/elsa/privacy_table.py --model minilm-l6 --out-suffix _minilm

H are the layer-p outputs (p from the split, 3 of tiny-bert's 6 blocks) of test texts of the ELSA tasks; a seed
draws the texts, the pair's sketch, the client's rotation seed and the noise. No training: the table takes
seconds, so every run recomputes it (nothing to resume)."""
from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

import torch

from fedlab.evidence.page import GENERATED

HERE = Path(__file__).resolve().parent
RATIOS = (2.1, 4.2, 8.4)
ROWS = [("direct", None, "Direct transmission"), ("noise", None, "Gaussian noise (σ = 0.25)"),
        ("sketch", None, "Sketch only"), ("ssop_sketch", 8, "SS-OP + sketch (r = 8)"),
        ("ssop_sketch", 16, "SS-OP + sketch (r = 16)")]


def hidden_states(model, tok, texts: list[str], layer: int, max_length: int = 48):
    enc = tok(texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
    with torch.no_grad():
        out = model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"], output_hidden_states=True)
    return out.hidden_states[layer], enc["input_ids"], enc["attention_mask"]


def one_seed(model, tok, layer: int, seed: int, n_texts: int) -> dict:
    from fedlab.comm import ssop_matrix
    from fedlab.comm.sketch import sketch_for_ratio
    from fedlab.comm.ssop import client_seed
    from fedlab.data.tasks import task_examples
    from fedlab.methods.elsa.privacy_eval import protect, reconstruction, token_accuracy

    pool = [e.prompt for t in ("topic", "sentiment", "paraphrase", "entailment") for e in task_examples(t, "test", 200)]
    rng = random.Random(seed)
    texts = rng.sample(pool, 2 * n_texts)
    h, ids, mask = hidden_states(model, tok, texts[:n_texts], layer)
    recent, _, recent_mask = hidden_states(model, tok, texts[n_texts:], layer)   # the client's J_n
    J = recent[recent_mask.bool()]
    table = model.get_input_embeddings().weight.detach()
    keep = mask.bool() & (ids != tok.cls_token_id) & (ids != tok.sep_token_id)
    out = {}
    for kind, r, label in ROWS:
        for ratio in (RATIOS if kind in ("sketch", "ssop_sketch") else (None,)):
            sk = None if ratio is None else sketch_for_ratio(h.shape[-1], ratio, seed=1000 + seed)
            q = ssop_matrix(J, r, client_seed("elsa", seed)) if r else None
            seen = protect(h, kind, sk, q, seed=seed)
            rec = reconstruction(h, seen, keep)
            out[f"{label}|{ratio}"] = {**rec, "token_acc": token_accuracy(seen, ids, table, keep),
                                       "achieved_ratio": None if sk is None else sk.ratio}
    return out


def _weights(name: str) -> dict:
    """The zoo model's fingerprint and weights' sha256 the table ran on ({} for a model outside the zoo)."""
    from fedlab.models.zoo import ZOO, read_meta

    if name not in ZOO:
        return {}
    meta = read_meta(name)
    return {k: meta.get(k) for k in ("fingerprint", "weights_sha256")}


def render(results: dict, model_name: str, layer: int, env: dict | None = None) -> str:
    from fedlab.evidence.stats import fmt_ci

    seeds = sorted(results)
    made = ("" if not env else f"; made at {str(env.get('commit'))[:7]}{'' if env.get('clean') else ' (dirty tree)'}, "
            f"numerics {env.get('numerics_fingerprint')}")
    lines = [GENERATED, f"# ELSA privacy (Table 4 analogue, {model_name}, layer-{layer} activations)", "",
             f"Produced by `python experiments/elsa/privacy_table.py` (seeds {', '.join(seeds)}{made}). Each cell: mean ± "
             "95 % interval over seeds. Cos / MSE compare H with what the edge sees; token acc. is a nearest-"
             "neighbour attack (cosine) against the input embedding table over the non-special tokens.", "",
             "| method | ρ | achieved ρ | cos sim. | MSE | token acc. (%) |", "|---|---|---|---|---|---|"]
    for key in results[seeds[0]]:
        label, ratio = key.split("|")
        vals = [results[s][key] for s in seeds]
        ach = vals[0]["achieved_ratio"]
        lines.append(f"| {label} | {'–' if ratio == 'None' else ratio} | {'–' if ach is None else f'{ach:.2f}'} | "
                     f"{fmt_ci([v['cos'] for v in vals])} | {fmt_ci([v['mse'] for v in vals])} | "
                     f"{fmt_ci([100 * v['token_acc'] for v in vals])} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="tiny-bert")
    ap.add_argument("--layer", type=int, default=None, help="the split's p (default: ⌊blocks/2⌋)")
    ap.add_argument("--seeds", default="0,1,2,3,4")
    ap.add_argument("--allow-dirty", action="store_true", help="run from a tree with uncommitted changes (the "
                    "record says so)")
    ap.add_argument("--texts", type=int, default=64)
    ap.add_argument("--out-suffix", default="")
    args = ap.parse_args(argv)
    from fedlab.validation import ConfigError, seed_list

    try:
        seeds = seed_list(args.seeds)
    except ConfigError as e:
        ap.error(str(e))
    from fedlab.evidence.provenance import source_environment
    from fedlab.evidence.runner import DirtyTree, check_tree
    from fedlab.methods.elsa.chains import default_split, model_dims
    from fedlab.models.zoo import load_encoder

    try:
        state = check_tree(args.allow_dirty, HERE)
    except DirtyTree as e:
        print(f"fedlab: error: {e}", file=sys.stderr)
        return 2
    torch.set_num_threads(1)
    layer = args.layer if args.layer is not None else default_split(model_dims(args.model)[0])[0]
    model, tok = load_encoder(args.model)
    results = {str(s): one_seed(model, tok, layer, s, args.texts) for s in seeds}
    env = source_environment(1, state)
    (HERE / f"results_privacy{args.out_suffix}.json").write_text(json.dumps(
        {"model": args.model, "layer": layer, "command": " ".join(["python experiments/elsa/privacy_table.py", *(argv or sys.argv[1:])]),
         "environment": env, "models": {args.model: _weights(args.model)}, "seeds": results}, indent=1))
    text = render(results, args.model, layer, env)
    (HERE / f"PRIVACY{args.out_suffix}.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
