"""Training throughput: fedlab's `ClientModule` under the Lightning Trainer (exactly as a client runs a
round) against a hand-written PyTorch loop over the same LoRA model, batches, optimizer and gradient
clipping (target: ≥ 0.9× the hand loop's tokens per second).

    python benchmarks/train_step.py                       # tiny-llama, a client's round (20 steps) and 200 steps
    python benchmarks/train_step.py --model big           # a 27M-parameter LLaMA built from a config

Each measurement starts from the same LoRA initialisation; trials alternate and the best of each is kept.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import table  # noqa: E402


def big_model_dir() -> str:
    """A LLaMA with d=512, 8 blocks (≈27M parameters, random weights) saved with the tiny LLM's tokenizer."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from fedlab.models.zoo import load_tokenizer

    path = os.path.join(tempfile.gettempdir(), "fedlab-bench-llama-d512")
    if not os.path.exists(os.path.join(path, "config.json")):
        tok = load_tokenizer("tiny-llama")
        cfg = LlamaConfig(vocab_size=len(tok), hidden_size=512, intermediate_size=1408, num_hidden_layers=8,
                          num_attention_heads=8, max_position_embeddings=256, pad_token_id=tok.pad_token_id)
        torch.manual_seed(0)
        LlamaForCausalLM(cfg).save_pretrained(path)
        tok.save_pretrained(path)
    return path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="tiny-llama", help="a zoo name, a folder, or 'big'")
    ap.add_argument("--steps", default="20,200")
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    from torch.utils.data import DataLoader

    from fedlab.config import load_config
    from fedlab.data.collate import PadCollator, TokenizedExamples
    from fedlab.data.federated import build_federated_data
    from fedlab.objectives.modules import ClientModule
    from fedlab.objectives.terms import target_cross_entropy
    from fedlab.objectives.training import make_trainer, optimizer_args
    from fedlab.runtime.resident import get_resident
    from fedlab.transforms.lora import set_state

    name = big_model_dir() if args.model == "big" else args.model
    cfg = load_config(None, [f"model.name={name}", "model.lora.dropout=0.0", "backend.device=cpu",
                             f"backend.threads={args.threads}"])
    res = get_resident(cfg)
    data = build_federated_data(cfg.data, cfg.seed)
    ds = TokenizedExamples(res.tokenizer, list(data.pooled_train()), cfg.model.max_length)
    collate = PadCollator(res.tokenizer.pad_token_id)
    g = torch.Generator().manual_seed(0)
    all_batches = list(DataLoader(ds, batch_size=cfg.federation.batch_size, shuffle=True, generator=g,
                                  collate_fn=collate))
    params = [dict(res.model.named_parameters())[k] for k in res.spec.trainable]

    def hand(batches):
        set_state(res.model, res.init_state)
        res.model.train()
        opt = torch.optim.AdamW(params, **{k: v for k, v in optimizer_args(cfg).items() if k != "warmup_ratio"})
        t0 = time.perf_counter()
        for b in batches:
            out = res.model(input_ids=b["input_ids"], attention_mask=b["attention_mask"])
            loss = target_cross_entropy(out.logits, b["labels"])
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
        return time.perf_counter() - t0

    def lightning(batches):
        set_state(res.model, res.init_state)
        res.model.train()
        t0 = time.perf_counter()
        module = ClientModule(res.model, res.spec.trainable, [], **optimizer_args(cfg))
        make_trainer(cfg, max_epochs=1).fit(module, DataLoader(batches, batch_size=None))
        return time.perf_counter() - t0

    rows = []
    for steps in [int(s) for s in args.steps.split(",")]:
        batches = [all_batches[i % len(all_batches)] for i in range(steps)]
        tokens = sum(int(b["attention_mask"].sum()) for b in batches)
        hand(batches[:3]), lightning(batches[:3])           # warm-up
        th, tl = float("inf"), float("inf")
        for _ in range(args.trials):
            th = min(th, hand(batches))
            tl = min(tl, lightning(batches))
        rows.append([str(steps), str(tokens), tokens / th, tokens / tl, (tokens / tl) / (tokens / th)])
        print(f"{steps} steps: hand {tokens / th:,.0f} tok/s, Lightning {tokens / tl:,.0f} tok/s", file=sys.stderr)
    n_params = sum(p.numel() for p in res.model.parameters())
    print(f"model {args.model} ({n_params / 1e6:.1f}M parameters, LoRA r={cfg.model.lora.r}), batch "
          f"{cfg.federation.batch_size}, {args.threads} threads")
    print(table(rows, ["steps", "tokens", "hand loop tok/s", "ClientModule+Trainer tok/s", "ratio"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
