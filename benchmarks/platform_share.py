"""The platform's share of a run: tokens per second of a whole federated run — every
client's Lightning fit, aggregation, evaluation, checkpoints and MLflow logging — against a single-process
hand-written loop that trains the same tokens (the same clients' batches, round after round, with the same
model, LoRA, AdamW and clipping) and does nothing else. Both in the same invocation, same thread count.

    python benchmarks/platform_share.py                      # FedAvg, tiny-llama, 8 clients, 4 rounds
    python benchmarks/platform_share.py federation.rounds=8 eval.every=8

Prints the ratio and where the rest of the federated run's time goes (from the run's own per-round timers).
Before the timing, a run of zero rounds on a tiny test set imports what a run imports and creates the MLflow
store (once per process and per store, as the zoo is built once): what is timed is a run in an environment
that has run before. Every score is computed (`eval.cache=false`).
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

# eval.cache=false: every score computed, as in a first run (a later run of the same models reads them back)
DEFAULT = ["method.name=fedavg", "model.name=tiny-llama", "federation.rounds=4", "backend.name=inprocess",
           "model.lora.dropout=0.0", "eval.cache=false"]


def hand_loop(cfg) -> tuple[float, int]:
    """Every (round, client) fit of the run as a bare PyTorch loop over the same batches (the client's data,
    shuffled with the seed the client would use): seconds and tokens trained."""
    from torch.utils.data import DataLoader

    from fedlab.data.collate import PadCollator, TokenizedExamples
    from fedlab.data.federated import build_federated_data
    from fedlab.objectives.terms import target_cross_entropy
    from fedlab.objectives.training import optimizer_args
    from fedlab.runtime.resident import get_resident
    from fedlab.seeding import derive_seed
    from fedlab.transforms.lora import set_state

    res = get_resident(cfg)
    data = build_federated_data(cfg.data, cfg.seed)
    sets = {cid: TokenizedExamples(res.tokenizer, list(data.train[cid]), cfg.model.max_length)
            for cid in range(data.num_clients)}
    params = [dict(res.model.named_parameters())[k] for k in res.spec.trainable]
    opt_args = {k: v for k, v in optimizer_args(cfg).items() if k != "warmup_ratio"}
    tokens, t0 = 0, time.perf_counter()
    for rnd in range(1, cfg.federation.rounds + 1):
        for cid, ds in sets.items():
            set_state(res.model, res.init_state)
            res.model.train()
            opt = torch.optim.AdamW(params, **opt_args)
            loader = DataLoader(ds, batch_size=cfg.federation.batch_size, shuffle=True,
                                generator=torch.Generator().manual_seed(derive_seed(cfg.seed, "fit", rnd, cid)),
                                collate_fn=PadCollator(res.tokenizer.pad_token_id))
            for _ in range(cfg.federation.local_epochs):
                for b in loader:
                    out = res.model(input_ids=b["input_ids"], attention_mask=b["attention_mask"])
                    loss = target_cross_entropy(out.logits, b["labels"])
                    loss.backward()
                    torch.nn.utils.clip_grad_norm_(params, 1.0)
                    opt.step()
                    opt.zero_grad(set_to_none=True)
                    tokens += int(b["attention_mask"].sum())
    return time.perf_counter() - t0, tokens


def warm_up(cfg) -> None:
    """A zero-round run on 4 test questions per task into the same MLflow store: the modules a run imports
    (torchmetrics, Lightning, MLflow's store) and the store's tables exist before the timed run."""
    from fedlab.config import replace
    from fedlab.experiment import run_experiment

    tiny = replace(cfg, federation=replace(cfg.federation, rounds=0), data=replace(cfg.data, test_per_task=4))
    run_experiment(tiny, progress=False)


def federated_run(cfg):
    """The whole run as `fedlab run` does it (MLflow tracking included): wall seconds and its history."""
    from fedlab.experiment import run_experiment
    from fedlab.tracking import make_tracker

    t0 = time.perf_counter()
    tracker = make_tracker(cfg)
    history = run_experiment(cfg, tracker=tracker, progress=False)
    tracker.finish()
    return time.perf_counter() - t0, history


def breakdown(total: float, history) -> list[list]:
    """Where the federated run's wall time goes, from the per-round timers the run records."""
    rounds = [r for r in history.rounds if r["round"] >= 1]
    fit = sum(v for r in rounds for k, v in r.items() if k.startswith("time/fit_client_"))
    fit_round = sum(r["time/fit_round"] for r in rounds)
    evaluation = sum(r.get("time/eval", 0.0) for r in rounds)
    zero = history.rounds[0].get("time/eval", 0.0)
    bookkeeping = sum(r["time/round"] - r["time/fit_round"] - r.get("time/eval", 0.0) for r in rounds)
    rest = total - sum(r["time/round"] for r in rounds) - zero
    parts = [("client fits (Lightning Trainer, training)", fit),
             ("rest of each round (instructions, aggregation, client bookkeeping)", fit_round - fit + bookkeeping),
             ("evaluation after rounds", evaluation),
             ("round-0 (zero-shot) evaluation", zero),
             ("outside the rounds (setup, checkpoints, MLflow logging)", rest)]
    return [[name, f"{s:.2f}", f"{s / total:.1%}"] for name, s in parts]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("overrides", nargs="*", help="key=value for both sides (after the defaults)")
    args = ap.parse_args(argv)

    from fedlab.config import load_config
    from fedlab.experiment import model_provenance

    with tempfile.TemporaryDirectory() as tmp:
        cfg = load_config(None, DEFAULT + [f"tracking.uri=sqlite:///{tmp}/mlflow.db",
                                           f"tracking.artifact_root={tmp}/artifacts",
                                           f"output_dir={tmp}/runs"] + args.overrides)
        if cfg.federation.local_steps is not None:
            print("platform_share: federation.local_steps is not supported here (the hand loop runs "
                  "local_epochs over each client's data); leave it unset", file=sys.stderr)
            return 2
        torch.set_num_threads(cfg.backend.threads)
        model_provenance(cfg)                     # zoo models built before any timing
        warm_up(cfg)
        t_hand, tokens = hand_loop(cfg)
        t_run, history = federated_run(cfg)
    hand_tps, run_tps = tokens / t_hand, tokens / t_run
    print(f"{cfg.method.name} on {cfg.model.name}: {history.final.get('clients/ok', '?')} clients × "
          f"{cfg.federation.rounds} rounds × {cfg.federation.local_epochs} local epoch(s), {tokens:,} tokens trained, "
          f"evaluation every {cfg.eval.every} round(s), {cfg.backend.threads} torch thread(s), backend "
          f"{cfg.backend.name}")
    print(table([["hand loop (training only)", f"{t_hand:.2f}", f"{hand_tps:,.0f}", "1"],
                 ["federated run (everything)", f"{t_run:.2f}", f"{run_tps:,.0f}", f"{run_tps / hand_tps:.2f}"]],
                ["what", "wall s", "tokens/s", "× hand loop"]))
    print("\nwhere the federated run's time goes:\n")
    print(table(breakdown(t_run, history), ["part", "s", "share"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
