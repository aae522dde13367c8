"""ELSA's compute overheads, each as a ratio against a baseline measured in the same run:

1. count-sketch compress + decompress of [batch·seq, D] activations against a copy of the same floats
   (target ≤ 5×), at the paper's ρ = 4.2 (Y = 3), on the products and on the native passes (fedlab.comm.native),
   at the model's width and at BERT-base's (D = 768; N = batch·seq and N = 4,096);
2. one split training step — client front → SS-OP → sketch → edge middle → sketch → client back + head, and the
   backward through the edge (straight-through), the edge's AdamW step included — against one step of the
   unsplit model on the same batch (target ≤ 1.5×, in-process).

    python benchmarks/elsa_split.py                      # tiny-bert, batch 16 × 48 tokens, 1 torch thread
    python benchmarks/elsa_split.py --model pico-bert --batch 8
    python benchmarks/elsa_split.py --sketch-only --repeat 200     # the count sketch alone"""
from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import best_time, table  # noqa: E402


def bench_sketch(dim: int, rows: int, ratio: float, repeat: int) -> list[list]:
    """compress + decompress against a copy of the same floats, on the path fedlab takes by default at this D
    (native from NATIVE_MIN_DIM on, where the library builds) and, beside it, on the other path; each path is
    timed in turn with the copy, best of `repeat` each, so that a busy moment of the machine falls on both alike."""
    import time

    from fedlab import compiled
    from fedlab.comm import native
    from fedlab.comm.sketch import NATIVE_MIN_DIM, native_agrees, sketch_for_ratio

    sk = sketch_for_ratio(dim, ratio, seed=0)
    x = torch.randn(rows, dim)
    copy = lambda: x.clone()
    paths = {"products": lambda: sk.decompress_products(sk.compress_products(x))}
    out = []
    try:
        compiled.set_mode("on")
        if native.library(native_agrees) is not None:
            sketched = sk.compress(x)
            paths["native"] = lambda: sk.decompress(sk.compress(x))
            paths["native, compress alone"] = lambda: sk.compress(x)
            paths["native, decompress alone"] = lambda: sk.decompress(sketched)
        for name, fn in paths.items():
            best = {copy: float("inf"), fn: float("inf")}
            for _ in range(1 + repeat):            # the first round warms both up
                for f in best:
                    t0 = time.perf_counter()
                    f()
                    best[f] = min(best[f], time.perf_counter() - t0)
            alone = "alone" in name
            default = not alone and (name == "native") == (dim >= NATIVE_MIN_DIM)
            out.append([f"sketch ρ={sk.ratio:.2f} [{rows}, {dim}] {'' if alone else 'compress+decompress, '}{name}"
                        + (" (default)" if default else ""), best[fn] * 1e3, best[copy] * 1e3,
                        best[fn] / best[copy], "—" if alone else "≤ 5×"])
    finally:
        compiled.set_mode(None)
    return out


def bench_step(model: str, batch: int, seq: int, repeat: int) -> list[list]:
    from fedlab.config import load_config
    from fedlab.data.federated import build_federated_data
    from fedlab.methods.elsa.chains import client_chain, full_chain, label_space
    from fedlab.methods.elsa.client import ClassifierModule, masked_logits
    from fedlab.methods.elsa.edge import ClientLink, EdgeHandle, EdgeServer, link_codec
    from fedlab.methods.elsa.model import root_of
    from fedlab.runtime import parties
    from fedlab.runtime.resident import get_resident
    from fedlab.transforms import set_state

    cfg = load_config("experiments/elsa/base.yaml", [f"model.name={model}", "method.split=null", "model.lora.dropout=0"])
    full = get_resident(cfg, chain=full_chain(cfg))
    client = get_resident(cfg, chain=client_chain(cfg))
    set_state(client.model, {k: full.init_state[k] for k in client.spec.communicated})
    classes = len(label_space(build_federated_data(cfg.data, cfg.seed)))
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, len(full.tokenizer), (batch, seq), generator=g)
    mask = torch.ones(batch, seq, dtype=torch.long)
    b = {"input_ids": ids, "attention_mask": mask, "allowed": torch.ones(batch, classes, dtype=torch.bool),
         "class_label": torch.randint(0, classes, (batch,), generator=g)}

    def stepper(res):
        module = ClassifierModule(res.model, res.spec.trainable, lr=1e-3)
        opt = module.configure_optimizers()

        def step():
            opt.zero_grad(set_to_none=True)
            out = res.model(input_ids=b["input_ids"], attention_mask=b["attention_mask"])
            torch.nn.functional.cross_entropy(masked_logits(out.logits, b["allowed"]), b["class_label"]).backward()
            opt.step()
        return step

    edge = EdgeServer(cfg, 0)
    edge.start(1, full.init_state, [0])
    parties.put("bench", edge)
    dim = full.model.config.hidden_size
    rows = []
    try:
        unsplit = best_time(stepper(full), repeat)
        raw = load_config("experiments/elsa/base.yaml", [f"model.name={model}", "method.ratio=1"])
        for label, codec, rotation in (("split, raw floats (Vanilla)", link_codec(raw, 0, dim), None),
                                       ("split, SS-OP + sketch ρ=4.2", link_codec(cfg, 0, dim),
                                        torch.linalg.qr(torch.randn(dim, dim, generator=g))[0])):
            edge.codecs[0] = codec
            root_of(client.model).link = ClientLink(EdgeHandle("bench"), 0, codec, rotation, rnd=1)
            split = best_time(stepper(client), repeat)
            rows.append([f"{label} [{batch}×{seq}]", split * 1e3, unsplit * 1e3, split / unsplit, "≤ 1.5×"])
    finally:
        root_of(client.model).link = None
        parties.stop(["bench"])
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="tiny-bert")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=48)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--sketch-only", action="store_true", help="time the count sketch only, not the split step")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    from fedlab.methods.elsa.chains import model_dims

    dim = model_dims(args.model)[1]
    rows = bench_sketch(dim, args.batch * args.seq, 4.2, args.repeat)
    rows += bench_sketch(768, args.batch * args.seq, 4.2, args.repeat)          # BERT-base's width
    rows += bench_sketch(768, 4096, 4.2, args.repeat)
    if not args.sketch_only:
        rows += bench_step(args.model, args.batch, args.seq, args.repeat)
    print(table(rows, ["what", "ms", "baseline ms", "ratio", "target"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
