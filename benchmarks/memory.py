"""Peak memory of clients sharing one frozen base (target: 8 clients ≤ 1.5× the peak RSS of 1 client).

Each setting runs in a fresh process: one FedAvg round, in-process backend, on a 27M-parameter LLaMA
(random weights, built once from a config; `--model` takes any zoo name or folder instead). fedlab keeps one
resident copy of the base per process and swaps each client's LoRA state in and out, so more clients add
only their adapters and data. For scale the table also shows what one model copy per client would need.

    python benchmarks/memory.py                 # 1 vs 8 clients
    python benchmarks/memory.py --clients 1,4,8,16
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import table  # noqa: E402


def child(model: str, clients: int) -> None:
    from fedlab.config import load_config
    from fedlab.experiment import run_experiment

    cfg = load_config(None, [f"model.name={model}", f"data.num_clients={clients}", "data.partition=iid",
                             "federation.rounds=1", "federation.local_steps=2", "eval.max_per_task=4",
                             "tracking.enabled=false", f"output_dir={os.environ.get('TMPDIR', '/tmp')}/fedlab-bench-mem",
                             "method.name=fedavg", "backend.device=cpu"])
    run_experiment(cfg, progress=False)
    import torch

    from fedlab.runtime.resident import get_resident

    n = sum(p.numel() * p.element_size() for p in get_resident(cfg).model.parameters())
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024      # Linux: kilobytes
    print(json.dumps({"peak_rss": peak, "model_bytes": n, "torch": torch.__version__}))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="big")
    ap.add_argument("--clients", default="1,8")
    ap.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.model == "big":
        from train_step import big_model_dir

        args.model = big_model_dir()
    if args.child is not None:
        child(args.model, args.child)
        return 0
    out = {}
    for n in [int(x) for x in args.clients.split(",")]:
        p = subprocess.run([sys.executable, __file__, "--model", args.model, "--child", str(n)],
                           capture_output=True, text=True, check=True)
        out[n] = json.loads(p.stdout.strip().splitlines()[-1])
        print(f"{n} clients: peak RSS {out[n]['peak_rss'] / 2**20:.0f} MiB", file=sys.stderr)
    base = min(out)
    rows = [[str(n), out[n]["peak_rss"] / 2**20, out[n]["peak_rss"] / out[base]["peak_rss"],
             (out[base]["peak_rss"] + (n - 1) * out[n]["model_bytes"]) / 2**20] for n in sorted(out)]
    print(f"model: {args.model} ({out[base]['model_bytes'] / 2**20:.0f} MiB of weights)")
    print(table(rows, ["clients", "peak RSS MiB", f"ratio to {base} client", "one copy per client (MiB, est.)"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
