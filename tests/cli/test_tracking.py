"""MLflow: a run of `fedlab run` is found through a real `mlflow server`'s REST API, metrics read back."""
import contextlib
import io
import json
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from conftest import PICO
from fedlab.cli import main

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str):
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read().decode() or "{}")


def _post(url: str, body: dict):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read().decode())


@pytest.fixture(scope="module")
def finished_run(pico_zoo, tmp_path_factory):
    """`fedlab run` as a user types it, in a fresh folder (default MLflow store: ./mlruns/mlflow.db)."""
    tmp = tmp_path_factory.mktemp("tracked")
    buf = io.StringIO()
    with contextlib.chdir(tmp), contextlib.redirect_stdout(buf):
        code = main(["run", str(ROOT / "experiments/baselines/fedavg_hetero.yaml"), *PICO, "data.num_clients=8",
                     "eval.every=1", "tracking.experiment=fedlab-test", "eval.target=0.01"])
    assert code == 0
    assert "| mean (over clients)" in buf.getvalue() and "zero-shot" in buf.getvalue()
    return tmp


@pytest.mark.federation
def test_run_is_in_mlflow_with_artifacts(finished_run):
    import mlflow

    mlflow.set_tracking_uri(f"sqlite:///{finished_run}/mlruns/mlflow.db")
    runs = mlflow.search_runs(experiment_names=["fedlab-test"], output_format="list")
    assert len(runs) == 1
    run = runs[0]
    assert run.data.params["method.name"] == "fedavg" and run.data.params["data.num_clients"] == "8"
    # the logged mean is the mean over the clients' logged accuracies (fedlab.eval.summary), read back as logged
    clients = [run.data.metrics[f"acc/client_{c}"] for c in range(8)]
    assert run.data.metrics["acc/mean"] == pytest.approx(sum(clients) / 8) and run.data.metrics["bytes/up"] > 0
    client = mlflow.MlflowClient()
    hist = client.get_metric_history(run.info.run_id, "acc/client_7")
    assert [m.step for m in hist] == [0, 1, 2]
    names = {a.path for a in client.list_artifacts(run.info.run_id)} | {
        a.path for a in client.list_artifacts(run.info.run_id, "plots")} | {
        a.path for a in client.list_artifacts(run.info.run_id, "plan")}
    assert {"config.yaml", "adapters.safetensors", "plots/accuracy_per_round.png", "plan/plan.txt",
            "plan/plan.json"} <= names
    # the run's plan: its roles at its batch and sequence length
    plan_txt = next((finished_run / "mlruns").rglob("plan.txt")).read_text()
    assert plan_txt.startswith("plan of ") and "peak (train)" in plan_txt
    # the artifacts live under mlruns/
    assert list((finished_run / "mlruns").rglob("accuracy_per_round.png"))


def test_report_reads_runs_back(finished_run):
    buf = io.StringIO()
    with contextlib.chdir(finished_run), contextlib.redirect_stdout(buf):
        assert main(["report", "--experiment", "fedlab-test"]) == 0
    out = buf.getvalue()
    assert "fedavg" in out and "pico-llama" in out and "FINISHED" in out
    assert "to eval.target" in out and "1/1 reached: 0.0 rounds, 0.00 MB" in out    # zero-shot already reaches 1 %


@pytest.mark.slow   # 20 s: starts an MLflow server; runs in MLflow and `fedlab report` stay in the default tier (default tier ≤ 10 min on 2 cores)
def test_mlflow_server_rest_api(finished_run):
    port = _free_port()
    db = f"sqlite:///{finished_run}/mlruns/mlflow.db"
    proc = subprocess.Popen([sys.executable, "-m", "mlflow", "server", "--backend-store-uri", db,
                             "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=finished_run)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 120
        while True:
            try:
                urllib.request.urlopen(f"{base}/health", timeout=2)
                break
            except Exception:
                if time.time() > deadline or proc.poll() is not None:
                    pytest.fail("mlflow server did not start")
                time.sleep(1)
        exp = _get(f"{base}/api/2.0/mlflow/experiments/get-by-name?"
                   + urllib.parse.urlencode({"experiment_name": "fedlab-test"}))["experiment"]
        runs = _post(f"{base}/api/2.0/mlflow/runs/search", {"experiment_ids": [exp["experiment_id"]]})["runs"]
        assert len(runs) == 1
        run_id = runs[0]["info"]["run_id"]
        hist = _get(f"{base}/api/2.0/mlflow/metrics/get-history?"
                    + urllib.parse.urlencode({"run_id": run_id, "metric_key": "acc/mean"}))["metrics"]
        assert sorted(m["step"] for m in hist) == [0, 1, 2]
        # the REST API answers the values the run logged (the store's own client reads the same history)
        import mlflow

        mlflow.set_tracking_uri(db)
        local = {m.step: m.value for m in mlflow.MlflowClient().get_metric_history(run_id, "acc/mean")}
        assert {m["step"]: m["value"] for m in hist} == local
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _page_text(chromium: str, url: str, profile: Path, needle: str, attempts: int = 6) -> str:
    """The rendered page's text (headless Chromium, the page's scripts run; styles and scripts dropped),
    loaded again (a fresh profile, a longer virtual-time budget) until `needle` is on it: the UI fetches its
    charts' data asynchronously and a dump may come before they are drawn."""
    import re
    import shutil

    text = ""
    for i in range(attempts):
        shutil.rmtree(profile, ignore_errors=True)
        dom = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                              "--no-first-run", "--disable-background-networking", "--disable-component-update",
                              "--disable-sync", f"--user-data-dir={profile}", "--window-size=1600,3000",
                              f"--virtual-time-budget={20000 * (i + 1)}", "--dump-dom", url],
                             capture_output=True, text=True, timeout=240).stdout
        dom = re.sub(r"<(style|script)[^>]*>.*?</\1>", " ", dom, flags=re.S)
        text = " ".join(re.sub(r"<[^>]+>", " ", dom).split())
        if needle in text:
            break
    return text


@pytest.mark.slow
def test_mlflow_ui_shows_the_runs_and_the_per_round_accuracy(finished_run, tmp_path):
    """`fedlab ui` serves MLflow's UI on fedlab's store; in headless Chromium the address it prints opens
    the runs table (not the GenAI overview) and a run's charts include acc/mean."""
    import shutil

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("Chromium is not installed (Debian: apt-get install chromium)")
    import mlflow

    mlflow.set_tracking_uri(f"sqlite:///{finished_run}/mlruns/mlflow.db")
    run = mlflow.search_runs(experiment_names=["fedlab-test"], output_format="list")[0]
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "fedlab.cli", "ui", "--experiment", "fedlab-test", "--port",
                             str(port)], cwd=finished_run, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True, start_new_session=True)
    try:
        printed = proc.stdout.readline()
        assert f"http://127.0.0.1:{port}/#/experiments/{run.info.experiment_id}/runs?workflowType" in printed
        url = printed.split(": ", 1)[1].strip()
        deadline = time.time() + 120
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
                break
            except Exception:
                if time.time() > deadline or proc.poll() is not None:
                    pytest.fail("mlflow ui did not start")
                time.sleep(1)
        runs_page = _page_text(chromium, url, tmp_path / "profile", run.info.run_name)
        assert "Runs - Experiment" in runs_page and run.info.run_name in runs_page and "1 matching run" in runs_page
        from fedlab.tracking import runs_view

        charts = _page_text(chromium, runs_view(run.info.experiment_id, run.info.run_id, f"http://127.0.0.1:{port}"),
                            tmp_path / "profile", "acc/mean")
        assert "Model metrics" in charts and "acc/mean" in charts
    finally:
        import os
        import signal

        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


def test_a_new_sqlite_store_is_made_by_one_process_at_a_time(tmp_path):
    """Two table runs that start together on a fresh clone must not both migrate the new store (MLflow's
    migration then fails with "duplicate column name"): setup_mlflow waits for `<db>.lock`, which another
    process holding it keeps it from touching the store, and goes on once it is released."""
    import threading

    fcntl = pytest.importorskip("fcntl")

    import mlflow.store.tracking.sqlalchemy_store  # noqa: F401  (imported here, so the wait below is the lock's)

    from fedlab.tracking import setup_mlflow

    db = tmp_path / "mlruns" / "mlflow.db"
    db.parent.mkdir()
    got = {}
    with open(db.with_name("mlflow.db.lock"), "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)          # another process making the store
        t = threading.Thread(target=lambda: got.update(exp=setup_mlflow(f"sqlite:///{db}", str(tmp_path / "a"), "x")))
        t.start()
        t.join(5.0)
        assert t.is_alive() and not db.exists()  # waiting; the store untouched
        fcntl.flock(held, fcntl.LOCK_UN)
    t.join(60)
    assert not t.is_alive() and got["exp"] and db.exists()


def test_a_store_whose_lock_cannot_be_made_still_opens(tmp_path, monkeypatch):
    """The store's lock is optional: where `<db>.lock` cannot be created (here: open refuses it), setup_mlflow
    opens the store without it, as it did before the lock, instead of failing on a traceback."""
    import builtins

    from fedlab.tracking import setup_mlflow

    db = tmp_path / "mlflow.db"
    real_open = builtins.open

    def refuse_lock(path, *a, **k):
        if str(path).endswith("mlflow.db.lock"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *a, **k)

    monkeypatch.setattr(builtins, "open", refuse_lock)
    assert setup_mlflow(f"sqlite:///{db}", str(tmp_path / "a"), "x") and db.exists()
