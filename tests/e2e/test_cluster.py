"""A real two-node Ray cluster on this machine (slow tier): `ray start --head` and a second node joining it,
one CPU each; a pico federation with `backend.address` set places one worker on each node and gives the
in-process numbers. The nodes the test starts are stopped at the end."""
from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import PICO

RAY = Path(sys.executable).with_name("ray")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.federation
@pytest.mark.slow
def test_two_node_cluster_places_workers_on_both_nodes_with_in_process_numbers(pico_zoo, tmp_path, monkeypatch):
    ray = pytest.importorskip("ray")
    # Ray 2.60's `ray start --head` turns token authentication on; a test cluster on 127.0.0.1 goes without
    # (a real one hands its token to every node and driver: RAY_AUTH_TOKEN, see the README)
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    from fedlab.config import load_config
    from fedlab.experiment import run_experiment

    port = _free_port()
    address = f"127.0.0.1:{port}"
    common = ["--num-cpus=1", "--disable-usage-stats"]
    ray.shutdown()
    try:
        subprocess.run([str(RAY), "start", "--head", f"--port={port}", "--node-ip-address=127.0.0.1",
                        "--include-dashboard=false", *common], check=True, capture_output=True, timeout=180)
        subprocess.run([str(RAY), "start", f"--address={address}", "--node-ip-address=127.0.0.1", *common],
                       check=True, capture_output=True, timeout=180)
        args = [*PICO, "data.num_clients=4", "data.tasks=[recall,sentiment]", "tracking.enabled=false"]
        on_cluster = run_experiment(load_config(None, [*args, f"output_dir={tmp_path}/a", "backend.name=ray",
                                                       f"backend.address={address}", "backend.num_workers=2",
                                                       "backend.cpus_per_worker=1"]), progress=False)
        ray.shutdown()
        assert on_cluster.backend == {"workers": 2, "nodes": 2}
    finally:
        ray.shutdown()
        subprocess.run([str(RAY), "stop", "--force"], capture_output=True, timeout=180)
    local = run_experiment(load_config(None, [*args, f"output_dir={tmp_path}/b"]), progress=False)
    keys = [k for k in local.rounds[-1] if k.startswith(("acc/", "loss/task", "bytes/"))]
    assert [{k: r.get(k) for k in keys} for r in on_cluster.rounds] == [{k: r.get(k) for k in keys} for r in local.rounds]
