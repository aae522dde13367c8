"""The benchmark scripts run (tiny sizes; no timing is asserted — the numbers live in benchmarks/README.md)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(*args, timeout=600):
    p = subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=ROOT, timeout=timeout,
                       env=os.environ.copy())
    assert p.returncode == 0, p.stderr[-3000:]
    return p.stdout


def test_kernel_benchmark_runs():
    out = _run("benchmarks/kernels.py", "--ks", "4", "--sizes", "300000", "--repeat", "1")
    for name in ("h_ties", "ties", "conflict_scores", "pairwise_cosine"):
        assert name in out
    assert "× copy" in out


def test_per_tensor_baselines_agree_with_the_kernels():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import torch
    from kernels import CHUNK, pt_conflict_scores, pt_pairwise_cosine

    from fedlab.aggregators import conflict_scores, pairwise_cosine

    tau = torch.randn(4, 3 * CHUNK + 7)
    chunks = list(tau.split(CHUNK, dim=1))
    assert torch.allclose(pt_pairwise_cosine(chunks), pairwise_cosine(tau), atol=1e-5)
    assert torch.equal(pt_conflict_scores(chunks), conflict_scores(tau))


@pytest.mark.federation
@pytest.mark.slow   # 22 s: the slowest benchmark smoke test runs in the slow tier (default tier ≤ 10 min)
def test_train_step_and_memory_benchmarks_run(pico_zoo):
    out = _run("benchmarks/train_step.py", "--model", "pico-llama", "--steps", "3", "--trials", "1")
    assert "ratio" in out
    out = _run("benchmarks/memory.py", "--model", "pico-llama", "--clients", "1,2")
    assert "peak RSS" in out


@pytest.mark.federation
@pytest.mark.slow
def test_round_overhead_benchmark_runs():
    out = _run("benchmarks/round_overhead.py", "--rounds", "3", timeout=1200)
    assert "fedlab ray" in out


@pytest.mark.federation
@pytest.mark.slow   # 7 s; tests/unit/test_eval.py checks the two scorers agree (default tier ≤ 10 min on 2 cores)
def test_eval_speed_benchmark_runs(pico_zoo):
    out = _run("benchmarks/eval_speed.py", "--model", "pico-llama", "--n", "8", "--threads", "1")
    assert "speed-up" in out and "identical accuracy on 8/8 tasks" in out


@pytest.mark.slow   # 17 s: a benchmark smoke test (default tier ≤ 10 min on 2 cores)
def test_floe_inference_benchmark_runs(pico_zoo):
    from fedlab.models import zoo

    zoo.build("pico-llama-s", progress=False)
    out = _run("benchmarks/floe_inference.py", "--model", "pico-llama-s", "--llm", "pico-llama", "--experts", "2",
               "--rank", "4", "--prompts", "2", "--tokens", "2", "--encoder", "pico-bert", "--repeats", "2")
    assert "router encoder pico-bert" in out and "stage 1 (regular expressions, keywords)" in out
    assert "Floe, mixture merged per prompt, no cache (as the tables run)" in out
    # the deployed comparison: the cached Floe row against the cached SLM, with an interval over the passes
    row = next(ln for ln in out.splitlines() if ln.startswith("| Floe, mixture merged per prompt, key/value cache"))
    assert "slm_cached" in row and " ± " in row


@pytest.mark.slow
def test_elsa_split_benchmark_runs(fedlab_home):
    from fedlab.models import zoo

    zoo.build("pico-bert", progress=False)
    out = _run("benchmarks/elsa_split.py", "--model", "pico-bert", "--batch", "2", "--seq", "8", "--repeat", "1")
    assert "compress+decompress" in out and "split, SS-OP + sketch" in out and "split, raw floats" in out


SMALL = ["model.name=pico-llama", "data.tasks=[recall,sentiment]", "data.num_clients=2", "data.train_per_task=16",
         "data.test_per_task=8", "data.public_size=8", "federation.rounds=1"]


@pytest.mark.federation
@pytest.mark.slow   # two worker processes start torch: ~30 s
def test_seeds_parallel_benchmark_gives_identical_numbers(pico_zoo):
    out = _run("benchmarks/seeds_parallel.py", "--seeds", "0,1", "--jobs", "2", *SMALL)
    assert "final metrics identical in every seed: yes" in out and "2 at a time" in out


@pytest.mark.federation
@pytest.mark.slow
def test_platform_share_benchmark_runs(pico_zoo):
    out = _run("benchmarks/platform_share.py", *SMALL)
    assert "federated run (everything)" in out and "client fits" in out


@pytest.mark.slow   # four processes load tiny-llama: ~30 s
def test_numerics_pin_benchmark_runs():
    out = _run("benchmarks/numerics_pin.py", "--repeats", "2", "--steps", "1")
    assert "- pinned (AVX2): median step" in out and "pinned / native:" in out


@pytest.mark.federation
@pytest.mark.slow   # 36 s: the GPU suite's own smoke run (default tier ≤ 10 min on 2 cores)
def test_gpu_suite_runs_on_the_cpu_at_smoke_size(fedlab_home, tmp_path):
    """benchmarks/gpu_suite.py end to end on tiny sizes: every section ends ok and its numbers land in the
    JSON and the Markdown; the device's trimming path agrees with the CPU's."""
    import json

    _run("benchmarks/gpu_suite.py", "--out", str(tmp_path / "out"), "--work", str(tmp_path / "work"), "--smoke")
    res = json.loads((tmp_path / "out/gpu_suite.json").read_text())
    assert {n: s["status"] for n, s in res["sections"].items()} == dict.fromkeys(("env", "kernels", "lora7b", "matrix"), "ok")
    kern = res["sections"]["kernels"]["result"]
    assert kern["check"]["magnitude_trim_equal"] and {r["kernel"] for r in kern["runs"]["vectorised"]["table"]} >= {"h_ties", "ties"}
    assert all("tokens_per_s" in p for p in res["sections"]["lora7b"]["result"]["points"])
    assert res["sections"]["matrix"]["result"]["failed"] == []
    md = (tmp_path / "out/gpu_suite.md").read_text()
    assert "## lora7b: ok" in md and "| fedavg | True |" in md
    assert not (tmp_path / "out/fedlab_home").exists()          # scratch went to --work


def test_gpu_suite_refuses_an_unknown_section(tmp_path):
    p = subprocess.run([sys.executable, "benchmarks/gpu_suite.py", "--out", str(tmp_path), "--smoke", "--sections", "kernels,warp"],
                       capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 2 and "--sections warp: unknown; allowed: env, kernels, lora7b, matrix" in p.stderr


def test_client_overhead_benchmark_runs(pico_zoo):
    """benchmarks/client_overhead.py at its smallest size: the bare loop and the federated round both run."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    p = subprocess.run([sys.executable, str(root / "benchmarks/client_overhead.py"), "--clients", "4"],
                       capture_output=True, text=True, timeout=600, cwd=root)
    assert p.returncode == 0, p.stderr[-2000:]
    row = next(ln for ln in p.stdout.splitlines() if ln.startswith("| 4 "))
    assert "| inprocess |" in row


@pytest.mark.slow   # the README's main job on a pico model in a fresh FEDLAB_HOME, on 2 threads and 1: ~40 s
def test_first_run_benchmark_times_the_readmes_command_and_its_split(tmp_path):
    page = tmp_path / "first_run.md"
    out = _run("benchmarks/first_run.py", "--set", "model.name=pico-llama", "federation.rounds=1",
               "data.train_per_task=16", "data.test_per_task=8", "--out", str(page))
    assert "fedlab run experiments/baselines/fedavg_hetero.yaml model.name=pico-llama" in out
    rows = [ln for ln in page.read_text().splitlines() if ln.startswith(("| 2 (the YAML's)", "| 1 "))]
    assert len(rows) == 2 and all("client fits" in r and "evaluation" in r for r in rows), rows
    assert len({r.split("|")[4] for r in rows}) == 1          # the same accuracies on 2 threads and 1


@pytest.mark.slow   # about a minute: four fresh processes each compute the digest at 1 and 2 threads
def test_numerics_vendor_benchmark_runs_and_the_rounded_vector_math_is_vendor_independent():
    out = _run("benchmarks/numerics_vendor.py")
    assert "1. the pin, this CPU" in out and "torch.sqrt correctly rounded" in out
    if "cpuid_fault" in Path("/proc/cpuinfo").read_text().split():
        assert "3 and 4 print one digest" in out
