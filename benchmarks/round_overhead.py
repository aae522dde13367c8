"""Round overhead: the time of a federated round not spent in client compute, for fedlab's in-process
and Ray backends and for Flower's simulation engine running the same clients (target: ours lower).

The clients are fedlab's own (`ClientHost` → `LoraClient`: a Lightning fit of LoRA on tiny-llama), with one
local step each so that the platform's share is visible. Per round, overhead = round time − client compute
on the critical path, where compute is what each client reports for its Trainer fit and the critical path
is Σ compute / parallel workers (the same estimate for every engine; in-process runs one client at a time).
Round 1 (start-up) is left out; the median over the rest is reported.

    python benchmarks/round_overhead.py                      # fedlab in-process and Ray
    bash benchmarks/setup_flower.sh                          # once: Flower in its own environment
    benchmarks/.venv-flower/bin/python benchmarks/round_overhead.py --flower   # all three, same run
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import table  # noqa: E402

CLIENTS, WORKERS = 4, 2


def overrides(rounds: int) -> list[str]:
    return ["model.name=tiny-llama", f"data.num_clients={CLIENTS}", "data.partition=iid", f"federation.rounds={rounds}",
            "federation.local_steps=1", "federation.batch_size=16", "method.name=fedavg", "tracking.enabled=false",
            f"eval.every={rounds + 1000}", "eval.max_per_task=1", "backend.device=cpu",
            f"output_dir={tempfile.gettempdir()}/fedlab-bench-rounds"]


def fedlab_rounds(backend: str, rounds: int) -> list[tuple[float, float]]:
    """(round seconds, critical-path client compute) per round."""
    from fedlab.config import load_config
    from fedlab.experiment import run_experiment

    extra = [f"backend.name={backend}"] + ([f"backend.num_workers={WORKERS}", f"backend.num_cpus={WORKERS}"]
                                            if backend == "ray" else [])
    h = run_experiment(load_config(None, overrides(rounds) + extra), progress=False)
    par = WORKERS if backend == "ray" else 1
    return [(r["time/fit_round"], sum(r[f"time/fit_client_{c}"] for c in range(CLIENTS)) / par)
            for r in h.rounds[1:]]


def flower_rounds(rounds: int) -> list[tuple[float, float]]:
    import flwr
    from flwr.client import ClientApp, NumPyClient
    from flwr.server import ServerApp, ServerAppComponents, ServerConfig
    from flwr.server.strategy import FedAvg
    from flwr.simulation import run_simulation

    from fedlab.config import load_config

    cfg = load_config(None, overrides(rounds))
    state: dict = {}
    host_box: dict = {}

    def host():
        if "host" not in host_box:
            from fedlab.runtime.host import ClientHost

            host_box["host"] = ClientHost(cfg, list(range(CLIENTS)))
        return host_box["host"]

    from fedlab.runtime.resident import get_resident

    init = get_resident(cfg).init_state
    keys = list(init)

    class Client(NumPyClient):
        def __init__(self, cid):
            self.cid = cid

        def fit(self, parameters, config):
            import torch

            from fedlab.comm.messages import FitIns

            st = {k: torch.from_numpy(a.copy()) for k, a in zip(keys, parameters)}
            res = host().fit(self.cid, FitIns(int(config["round"]), st, {}))
            return [res.state[k].numpy() for k in keys], res.num_examples, {"time_fit": res.metrics["time/fit"]}

    def client_fn(context):
        return Client(int(context.node_config["partition-id"])).to_client()

    class Timed(FedAvg):
        def configure_fit(self, server_round, parameters, client_manager):
            state.setdefault("t0", {})[server_round] = time.perf_counter()
            return super().configure_fit(server_round, parameters, client_manager)

        def aggregate_fit(self, server_round, results, failures):
            out = super().aggregate_fit(server_round, results, failures)
            compute = sum(fr.metrics["time_fit"] for _, fr in results) / WORKERS
            state.setdefault("rounds", []).append((time.perf_counter() - state["t0"][server_round], compute))
            return out

    from flwr.common import ndarrays_to_parameters

    def server_fn(context):
        strategy = Timed(fraction_fit=1.0, fraction_evaluate=0.0, min_fit_clients=CLIENTS, min_available_clients=CLIENTS,
                         initial_parameters=ndarrays_to_parameters([init[k].numpy() for k in keys]),
                         on_fit_config_fn=lambda rnd: {"round": rnd})
        return ServerAppComponents(strategy=strategy, config=ServerConfig(num_rounds=rounds))

    run_simulation(ServerApp(server_fn=server_fn), ClientApp(client_fn=client_fn), num_supernodes=CLIENTS,
                   backend_config={"client_resources": {"num_cpus": 1, "num_gpus": 0.0},
                                   "init_args": {"num_cpus": WORKERS, "include_dashboard": False}})
    print(f"flwr {flwr.__version__}", file=sys.stderr)
    return state["rounds"][1:]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--flower", action="store_true", help="also run Flower's simulation (needs flwr installed)")
    args = ap.parse_args()
    results = {}
    results["fedlab inprocess"] = fedlab_rounds("inprocess", args.rounds)[1:]
    results["fedlab ray"] = fedlab_rounds("ray", args.rounds)[1:]
    import ray

    ray.shutdown()
    if args.flower:
        results["flower simulation"] = flower_rounds(args.rounds)
    rows = []
    for name, rs in results.items():
        over = [t - c for t, c in rs]
        rows.append([name, str(len(rs)), statistics.median(t for t, _ in rs), statistics.median(c for _, c in rs),
                     statistics.median(over)])
    base = {r[0]: r[4] for r in rows}
    for r in rows:
        r.append(r[4] / base["fedlab ray"])
    print(f"{CLIENTS} clients, {WORKERS} parallel workers (Ray and Flower), 1 local step on tiny-llama")
    print(table(rows, ["engine", "rounds", "round s (median)", "compute s (critical path)", "overhead s",
                       "overhead / fedlab ray"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
