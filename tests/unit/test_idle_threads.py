"""OpenMP's idle threads spin on a free machine and sleep on a busy one (fedlab/idle_threads.py)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from fedlab import idle_threads


@pytest.fixture
def env(monkeypatch):
    """A copy of the environment without the wait variables, restored afterwards, and the decision restored."""
    monkeypatch.setattr(os, "environ", idle_threads.without_policy(os.environ))
    monkeypatch.setattr(idle_threads, "decision", idle_threads.decision)
    return os.environ


def _apply(others, cores=2, loaded=False):
    idle_threads.apply(probe=lambda: others, cores=lambda: cores, torch_loaded=lambda: loaded)


def test_runnable_reads_the_fourth_field_of_loadavg():
    assert idle_threads.runnable("0.52 0.58 0.59 3/467 12345") == 3


def test_others_running_is_the_median_of_the_looks_less_this_thread(tmp_path, monkeypatch):
    f = tmp_path / "loadavg"
    f.write_text("1.00 0.90 0.80 4/467 12345\n")
    assert idle_threads.others_running(looks=2, gap=0, path=str(f)) == 3
    counts = iter([5, 1, 4, 9, 2])
    monkeypatch.setattr(idle_threads, "runnable", lambda text: next(counts))
    assert idle_threads.others_running(looks=5, gap=0, path=str(f)) == 3          # median 4, less this one
    monkeypatch.setattr(idle_threads, "runnable", lambda text: 0)                 # a synthetic /proc
    assert idle_threads.others_running(looks=1, gap=0, path=str(f)) == 0


def test_others_running_is_none_where_the_count_cannot_be_read(tmp_path):
    assert idle_threads.others_running(path=str(tmp_path / "absent")) is None
    (tmp_path / "loadavg").write_text("garbage\n")
    assert idle_threads.others_running(path=str(tmp_path / "loadavg")) is None


@pytest.mark.parametrize("others, cores, passive", [(1, 2, True), (0, 2, False), (None, 2, False), (0, 1, False),
                                                    (1, 1, True), (1, 3, False), (2, 3, True), (31, 64, False),
                                                    (32, 64, True)])
def test_idle_threads_sleep_where_others_fill_half_the_cores(env, others, cores, passive):
    _apply(others, cores)
    assert env.get("OMP_WAIT_POLICY") == ("PASSIVE" if passive else None)
    assert ("PASSIVE" in idle_threads.decision) == passive and "GOMP_SPINCOUNT" not in env


@pytest.mark.parametrize("key, value", [("OMP_WAIT_POLICY", "ACTIVE"), ("GOMP_SPINCOUNT", "1000"),
                                        ("OMP_WAIT_POLICY", "PASSIVE")])
def test_a_users_own_wait_variable_is_kept_and_the_machine_not_probed(env, key, value):
    env[key] = value
    idle_threads.apply(probe=lambda: pytest.fail("probed"), cores=lambda: 2, torch_loaded=lambda: False)
    assert env[key] == value and idle_threads.decision == f"the user's own {key}={value}"
    assert [k for k in idle_threads.VARIABLES if k in env] == [key]


def test_a_policy_fedlab_chose_is_decided_again_by_the_processes_it_starts(env):
    _apply(1)                                            # a busy machine: this process sleeps, and marks it
    assert env["OMP_WAIT_POLICY"] == env[idle_threads.MARK] == "PASSIVE"
    _apply(0)                                            # a child that inherits both, on a machine now free
    assert "OMP_WAIT_POLICY" not in env and idle_threads.MARK not in env
    assert idle_threads.decision.startswith("libgomp's default")


def test_nothing_is_set_once_torch_is_loaded(env):
    _apply(1, loaded=True)
    assert "OMP_WAIT_POLICY" not in env and "torch was loaded before fedlab" in idle_threads.decision


def test_importing_fedlab_on_a_busy_machine_sets_the_passive_policy_before_torch_loads():
    """Half the host's cores held by busy loops (each running before the probe starts): a fresh process that
    imports fedlab waits passively, and has not loaded torch by then (libgomp reads the variable once)."""
    clean = idle_threads.without_policy(os.environ)
    loop = "print('ready', flush=True)\nwhile True: pass"
    loops = [subprocess.Popen([sys.executable, "-c", loop], stdout=subprocess.PIPE, text=True)
             for _ in range((idle_threads.cores() + 1) // 2)]
    try:
        assert all(p.stdout.readline().strip() == "ready" for p in loops)
        probe = "import fedlab, os, sys; print(os.environ.get('OMP_WAIT_POLICY'), 'torch' in sys.modules)"
        out = subprocess.run([sys.executable, "-c", probe], env=clean, capture_output=True, text=True, check=True)
    finally:
        for p in loops:
            p.kill()
            p.wait()
    assert out.stdout.split() == ["PASSIVE", "False"]
