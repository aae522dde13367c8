"""OpenMP's idle threads spin on a free machine and sleep on a busy one (fedlab/idle_threads.py)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from fedlab import idle_threads


@pytest.fixture
def no_policy(monkeypatch):
    for k in idle_threads.VARIABLES:
        monkeypatch.delenv(k, raising=False)


def test_runnable_reads_the_fourth_field_of_loadavg():
    assert idle_threads.runnable("0.52 0.58 0.59 3/467 12345") == 3


def test_others_running_is_the_fewest_runnable_threads_less_this_one(tmp_path):
    f = tmp_path / "loadavg"
    f.write_text("1.00 0.90 0.80 4/467 12345\n")
    assert idle_threads.others_running(looks=2, gap=0, path=str(f)) == 3
    assert idle_threads.others_running(path=str(tmp_path / "absent")) is None
    f.write_text("garbage\n")
    assert idle_threads.others_running(path=str(f)) is None


@pytest.mark.parametrize("others, cores, passive", [(1, 2, True), (0, 2, False), (None, 2, False),
                                                    (1, 64, False), (32, 64, True), (1, 1, True)])
def test_idle_threads_sleep_where_others_hold_half_the_cores(no_policy, others, cores, passive):
    idle_threads.apply(probe=lambda: others, cores=lambda: cores)
    assert os.environ.get("OMP_WAIT_POLICY") == ("PASSIVE" if passive else None)
    assert ("PASSIVE" in idle_threads.decision) == passive
    assert "GOMP_SPINCOUNT" not in os.environ


@pytest.mark.parametrize("key, value", [("OMP_WAIT_POLICY", "ACTIVE"), ("GOMP_SPINCOUNT", "1000")])
def test_a_users_own_wait_variable_is_kept_and_the_machine_not_probed(no_policy, monkeypatch, key, value):
    monkeypatch.setenv(key, value)
    idle_threads.apply(probe=lambda: pytest.fail("probed"), cores=lambda: 2)
    assert os.environ[key] == value and idle_threads.decision == f"the user's own {key}={value}"
    assert [k for k in idle_threads.VARIABLES if k in os.environ] == [key]


def test_importing_fedlab_on_a_busy_machine_sets_the_passive_policy_before_torch_loads():
    """Every core held by a busy loop: a fresh process that imports fedlab waits passively, and has not loaded
    torch by then (libgomp reads the variable once, when torch loads it)."""
    env = {k: v for k, v in os.environ.items() if k not in idle_threads.VARIABLES}
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(idle_threads.cores())]
    try:
        probe = "import fedlab, os, sys; print(os.environ.get('OMP_WAIT_POLICY'), 'torch' in sys.modules)"
        out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    finally:
        for p in loops:
            p.kill()
            p.wait()
    assert out.stdout.split() == ["PASSIVE", "False"]
