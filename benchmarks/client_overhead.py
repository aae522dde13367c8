"""The cost of a simulated client: per sampled client, the time a federated round spends outside that client's own
training step, against a bare loop over the same clients' batches in the same run (pico-llama, one local step
each, FedAvg), for 10, 100 and 1,000 clients per round, in-process and on Ray.

The bare loop is the floor: for each client, its state loaded into the one resident model, its first batch, one
forward, backward and AdamW step — nothing else. The federated round is `time/fit_round` of rounds 2 and on
(round 1 pays start-up); per-client overhead = (round − bare) / clients. Targets: the round at least 0.5× the
bare loop's speed in-process, and Ray with 2 workers at least as fast as in-process.

    python benchmarks/client_overhead.py [--clients 10,100,1000] [--ray] [--out benchmarks/results/client_overhead.md]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import Report, table  # noqa: E402

ROUNDS = 3


def overrides(clients: int, backend: str) -> list[str]:
    out = ["model.name=pico-llama", f"data.num_clients={clients}", "data.partition=iid",
           f"data.train_per_task={max(24, 4 * clients)}", "data.test_per_task=8", "data.tasks=[recall,sentiment]",
           f"federation.rounds={ROUNDS}", "federation.local_steps=1", "federation.batch_size=4",
           "model.max_length=48", "method.name=fedavg", "tracking.enabled=false", f"eval.every={ROUNDS + 100}",
           "eval.max_per_task=1", "backend.device=cpu", "backend.threads=1", f"backend.name={backend}",
           f"output_dir={tempfile.gettempdir()}/fedlab-bench-clients-{clients}-{backend}"]
    if backend == "ray":
        out += ["backend.num_workers=2", "backend.num_cpus=2"]
    return out


def federated_round(clients: int, backend: str) -> float:
    """The median `time/fit_round` of rounds 2 and on."""
    from fedlab.config import load_config
    from fedlab.experiment import run_experiment

    h = run_experiment(load_config(None, overrides(clients, backend)), progress=False)
    return statistics.median(r["time/fit_round"] for r in h.rounds[2:])


def bare_loop(clients: int) -> float:
    """One optimizer step per client on its first batch, in one process, on one resident model."""
    import torch
    from torch.utils.data import DataLoader

    from fedlab.config import load_config
    from fedlab.data.collate import PadCollator
    from fedlab.runtime.host import ClientHost
    from fedlab.transforms.lora import set_state

    cfg = load_config(None, overrides(clients, "inprocess"))
    torch.set_num_threads(1)
    host = ClientHost(cfg, list(range(clients)))
    batches, res = [], None
    for client in host.clients.values():
        res = client.resident
        ds = client.dataset("own", client.train_examples(None))
        loader = DataLoader(ds, batch_size=cfg.federation.batch_size, collate_fn=PadCollator(res.tokenizer.pad_token_id))
        batches.append(next(iter(loader)))
    params = [p for n, p in res.model.named_parameters() if n in set(res.spec.trainable)]
    times = []
    for _ in range(2):
        t0 = time.perf_counter()
        for batch in batches:
            set_state(res.model, res.init_state)
            opt = torch.optim.AdamW(params, lr=cfg.federation.lr)
            res.model.train()
            loss = res.model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                             labels=batch["labels"]).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", default="10,100,1000")
    ap.add_argument("--ray", action="store_true", help="also on Ray with 2 workers")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    report = Report("benchmarks/client_overhead.py")
    rows = []
    for n in (int(x) for x in args.clients.split(",")):
        bare = bare_loop(n)
        inprocess = None
        for backend in ("inprocess", "ray") if args.ray else ("inprocess",):
            fed = federated_round(n, backend)
            if backend == "inprocess":
                inprocess, target = fed, ("met" if bare / fed >= 0.5 else "not met") + " (≥ 0.5× the bare loop)"
            else:
                target = ("met" if fed <= inprocess else "not met") + " (no slower than in-process)"
            rows.append([str(n), backend, f"{bare:.2f}", f"{fed:.2f}", f"{1000 * (fed - bare) / n:.1f}",
                         f"{bare / fed:.2f}", target])
    report.emit("## Per sampled client: a federated round against the bare loop over the same batches\n")
    report.emit(table(rows, ["clients per round", "backend", "bare loop (s)", "federated round (s)",
                             "overhead per client (ms)", "round speed × bare loop", "target"]))
    if args.out:
        report.write(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
