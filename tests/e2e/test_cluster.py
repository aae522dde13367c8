"""A real two-node Ray cluster on this machine (slow tier): `ray start --head` and a second node joining it,
one CPU each; a pico federation with `backend.address` set places one worker on each node and gives the
in-process numbers. The nodes the test starts, and only they, are stopped at the end (`ray start --block`
ends its node's processes when it is terminated; `ray stop` would end every Ray instance on the machine,
other tests' too). The driver runs in a subprocess: Ray fixes its authentication mode once per process, so a
driver of this token-less cluster would leave this process unable to start Ray with the default token mode."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import PICO

RAY = Path(sys.executable).with_name("ray")

DRIVER = """
import json, sys, time
import ray
from fedlab.config import load_config
from fedlab.experiment import run_experiment

address, out, *args = sys.argv[1:]
ray.init(address=address)
deadline = time.monotonic() + 120
while sum(n["Alive"] for n in ray.nodes()) < 2 and time.monotonic() < deadline:
    time.sleep(0.5)
ray.shutdown()
h = run_experiment(load_config(None, args), progress=False)
json.dump({"backend": h.backend, "rounds": h.rounds}, open(out, "w"), default=float)
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_port(port: int, node: subprocess.Popen, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if node.poll() is not None:
            raise AssertionError(f"`ray start --head` exited with {node.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.5)
    raise AssertionError(f"the head node did not listen on port {port} within {timeout:.0f} s")


def _stop(node: subprocess.Popen) -> None:
    if node.poll() is None:
        node.send_signal(signal.SIGTERM)
        try:
            node.wait(timeout=60)
        except subprocess.TimeoutExpired:
            node.kill()
            node.wait()


@pytest.mark.federation
@pytest.mark.slow
def test_two_node_cluster_places_workers_on_both_nodes_with_in_process_numbers(pico_zoo, tmp_path):
    pytest.importorskip("ray")
    from fedlab.config import load_config
    from fedlab.experiment import run_experiment

    # Ray 2.60's `ray start --head` turns token authentication on; a test cluster on 127.0.0.1 goes without
    # (a real one hands its token to every node and driver: RAY_AUTH_TOKEN, see the README)
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    port = _free_port()
    address = f"127.0.0.1:{port}"
    common = ["--num-cpus=1", "--disable-usage-stats", "--block"]
    args = [*PICO, "data.num_clients=4", "data.tasks=[recall,sentiment]", "tracking.enabled=false"]
    nodes = []
    try:
        nodes.append(subprocess.Popen([str(RAY), "start", "--head", f"--port={port}", "--node-ip-address=127.0.0.1",
                                       "--include-dashboard=false", *common], env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        _wait_for_port(port, nodes[0])
        nodes.append(subprocess.Popen([str(RAY), "start", f"--address={address}", "--node-ip-address=127.0.0.1",
                                       *common], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        out = tmp_path / "on_cluster.json"
        driver = subprocess.run([sys.executable, "-c", DRIVER, address, str(out), *args,
                                 f"output_dir={tmp_path}/a", "backend.name=ray", f"backend.address={address}",
                                 "backend.num_workers=2", "backend.cpus_per_worker=1"],
                                env=env, capture_output=True, text=True, timeout=900)
        assert driver.returncode == 0, driver.stderr[-3000:]
    finally:
        for node in reversed(nodes):
            _stop(node)
    on_cluster = json.loads(out.read_text())
    assert on_cluster["backend"] == {"workers": 2, "nodes": 2}
    local = run_experiment(load_config(None, [*args, f"output_dir={tmp_path}/b"]), progress=False)
    local_rounds = json.loads(json.dumps(local.rounds, default=float))
    keys = [k for k in local_rounds[-1] if k.startswith(("acc/", "loss/task", "bytes/"))]
    assert [{k: r.get(k) for k in keys} for r in on_cluster["rounds"]] == \
        [{k: r.get(k) for k in keys} for r in local_rounds]
