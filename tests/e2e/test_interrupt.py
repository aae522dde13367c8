"""SIGINT and SIGTERM stop a run at the next safe point (a round's end, its checkpoint
written) with one line and the resume command; the MLflow run ends KILLED; resuming gives the numbers of an
uninterrupted run. A second signal stops at once."""
from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import PICO
from fedlab import interrupt

ROOT = Path(__file__).resolve().parents[2]
RUN = PICO + ["federation.rounds=4", "method.name=fedavg", "data.partition=iid", "data.num_clients=3",
              "data.tasks=[recall,sentiment]"]


def test_the_first_signal_asks_the_second_stops(capsys):
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}     # Ray may have set its own
    with interrupt.handlers():
        interrupt.stop_point(1)                       # nothing asked: no stop
        os.kill(os.getpid(), signal.SIGTERM)
        assert interrupt.requested() == signal.SIGTERM
        assert "SIGTERM: stopping at the next safe point" in capsys.readouterr().err
        with pytest.raises(interrupt.Interrupted) as e:
            interrupt.stop_point(3)
        assert e.value.after_round == 3 and e.value.exit_code == 143
        with pytest.raises(interrupt.Interrupted, match="second signal"):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)
    assert interrupt.requested() is None
    assert {s: signal.getsignal(s) for s in before} == before        # the handlers from before are back


def test_interrupted_crosses_a_process_boundary():
    e = pickle.loads(pickle.dumps(interrupt.Interrupted(signal.SIGINT, 2, "x")))
    assert (e.signum, e.after_round, e.where, e.exit_code) == (signal.SIGINT, 2, "x", 130)


@pytest.mark.federation
def test_a_stopped_run_is_killed_in_mlflow_and_resumes_to_the_same_numbers(pico_zoo, tmp_path, monkeypatch):
    import mlflow

    from fedlab.config import load_config
    from fedlab.experiment import run_experiment
    from fedlab.runtime import federation

    track = lambda d: [f"tracking.uri=sqlite:///{tmp_path}/{d}.db", f"tracking.artifact_root={tmp_path}/a",  # noqa: E731
                       f"output_dir={tmp_path}/{d}"]
    whole = run_experiment(load_config(ROOT / "experiments/defaults.yaml", RUN + track("whole")), progress=False)
    progress = federation._progress

    def signal_in_round_2(method, m, rounds, seconds):      # the signal lands while round 2 is being reported
        if m["round"] == 2:
            os.kill(os.getpid(), signal.SIGINT)
        return progress(method, m, rounds, seconds)

    monkeypatch.setattr(federation, "_progress", signal_in_round_2)
    cfg = load_config(ROOT / "experiments/defaults.yaml", RUN + track("cut"))
    with interrupt.handlers(), pytest.raises(interrupt.Interrupted) as e:
        run_experiment(cfg, progress=True)
    assert e.value.after_round == 2
    monkeypatch.setattr(federation, "_progress", progress)
    ck = federation.load_checkpoint(federation.run_dir(cfg) / "checkpoint.pt")
    assert ck["round"] == 2
    run_id = (federation.run_dir(cfg) / "mlflow_run_id").read_text()
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path}/cut.db")
    assert mlflow.MlflowClient().get_run(run_id).info.status == "KILLED"
    done = run_experiment(load_config(ROOT / "experiments/defaults.yaml", RUN + track("cut") + ["resume=true"]),
                          progress=False)
    assert done.run_id == run_id and done.final["acc/mean"] == whole.final["acc/mean"]
    assert mlflow.MlflowClient().get_run(run_id).info.status == "FINISHED"


def _wait_for(proc, path: Path, text: str, timeout: float = 120) -> None:
    t0 = time.monotonic()
    while text not in (path.read_text() if path.exists() else ""):
        assert proc.poll() is None, path.read_text()[-2000:]
        assert time.monotonic() - t0 < timeout, "timed out"
        time.sleep(0.05)


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_fedlab_run_on_a_signal_prints_one_line_and_the_resume_command(pico_zoo, tmp_path, sig):
    args = ["run", str(ROOT / "experiments/defaults.yaml"), *RUN, f"tracking.uri=sqlite:///{tmp_path}/m.db",
            f"tracking.artifact_root={tmp_path}/a", f"output_dir={tmp_path}/runs"]
    err = tmp_path / "err.txt"
    with open(err, "w") as f:
        proc = subprocess.Popen([sys.executable, "-m", "fedlab.cli", *args], cwd=tmp_path, stderr=f,
                                stdout=subprocess.DEVNULL)
        _wait_for(proc, err, "round 1/4")
        proc.send_signal(sig)
        code = proc.wait(timeout=300)
    last = err.read_text().strip().splitlines()[-1]
    assert code == interrupt.EXIT_CODES[sig] and "Traceback" not in err.read_text()
    assert last.startswith(f"fedlab: interrupted ({signal.Signals(sig).name}) after round ")
    assert last.endswith("resume=true") and "fedlab run " in last
    again = subprocess.run([sys.executable, "-m", "fedlab.cli", *args, "resume=true"], cwd=tmp_path,
                           capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and "resuming" in again.stderr


@pytest.mark.slow
def test_a_zoo_build_stops_on_sigterm_in_one_line(tmp_path):
    err = tmp_path / "err.txt"
    with open(err, "w") as f:
        proc = subprocess.Popen([sys.executable, "-m", "fedlab.cli", "zoo", "build", "tiny-bert", "--rebuild"],
                                cwd=tmp_path, stderr=f, stdout=subprocess.DEVNULL,
                                env={**os.environ, "FEDLAB_HOME": str(tmp_path / "home")})
        _wait_for(proc, err, "building tiny-bert")
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=120)
    text = err.read_text()
    assert code == 143 and "Traceback" not in text
    assert text.strip().splitlines()[-1].startswith("fedlab: error: interrupted (SIGTERM while building zoo model")


@pytest.mark.federation
def test_a_signal_stops_a_series_of_runs_after_the_current_round(pico_zoo, tmp_path, monkeypatch):
    """`run_many` one run at a time (tables with --jobs 1, --seeds): the run in progress stops at its round's
    end and the next is never started; Interrupted reaches the caller (a table script says so in one line)."""
    from fedlab.config import load_config
    from fedlab.parallel import run_many
    from fedlab.runtime import federation

    progress = federation._progress

    def signal_in_round_1(method, m, rounds, seconds):
        if m["round"] == 1:
            os.kill(os.getpid(), signal.SIGTERM)
        return progress(method, m, rounds, seconds)

    monkeypatch.setattr(federation, "_progress", signal_in_round_1)
    cfgs = [load_config(ROOT / "experiments/defaults.yaml", RUN + ["tracking.enabled=false", f"seed={s}",
                                                                   f"output_dir={tmp_path}/runs"]) for s in (0, 1)]
    got = []
    with pytest.raises(interrupt.Interrupted) as e:
        for i, _h in run_many(cfgs, [None, None], jobs=1, progress=True):
            got.append(i)
    assert e.value.after_round == 1 and got == []
    assert not any((tmp_path / "runs").glob("*")) or len(list((tmp_path / "runs").iterdir())) == 1
    # the series resumed (resume=true, as the line says) ends on the numbers of an uninterrupted series
    monkeypatch.setattr(federation, "_progress", progress)
    series = lambda folder, *extra: [load_config(ROOT / "experiments/defaults.yaml", RUN + [  # noqa: E731
        "tracking.enabled=false", f"seed={s}", f"output_dir={tmp_path}/{folder}", *extra]) for s in (0, 1)]
    numbers = lambda h: {k: v for k, v in h.final.items() if k.startswith(("acc/", "loss/", "bytes/"))}  # noqa: E731
    resumed = {i: numbers(h) for i, h in run_many(series("runs", "resume=true"), [None, None], jobs=1)}
    fresh = {i: numbers(h) for i, h in run_many(series("fresh"), [None, None], jobs=1)}
    assert resumed == fresh and len(fresh) == 2 and all(fresh.values())


@pytest.mark.federation
@pytest.mark.parametrize("signals", [1, 2])
def test_sigterm_inside_a_clients_trainer_fit_stops_after_the_round_and_resumes_to_the_same_numbers(
        pico_zoo, tmp_path, monkeypatch, signals):
    """SIGTERM landing during a Lightning fit (what a scheduler's preemption does): the fit and its round finish,
    the run stops with Interrupted after that round (a non-zero exit), never a SystemExit that exits 0, and
    resuming ends on the uninterrupted run's numbers. A second signal in the same fit stops at once: not a
    client failure of a round that goes on, and no checkpoint of the round it cut short (the last one stands)."""
    import lightning as L

    from fedlab.config import load_config
    from fedlab.experiment import run_experiment
    from fedlab.objectives import training
    from fedlab.runtime import federation

    track = lambda d: [f"tracking.uri=sqlite:///{tmp_path}/{d}.db", f"tracking.artifact_root={tmp_path}/a",  # noqa: E731
                       f"output_dir={tmp_path}/{d}"]
    whole = run_experiment(load_config(ROOT / "experiments/defaults.yaml", RUN + track("whole")), progress=False)
    make = training.make_trainer
    fits = []

    class SigtermAtFirstBatch(L.Callback):
        def on_train_batch_start(self, trainer, module, batch, batch_idx):
            if batch_idx == 0 and len(fits) == 4:        # round 2's first client (3 clients a round)
                fits.append("signalled")
                for _ in range(signals):
                    os.kill(os.getpid(), signal.SIGTERM)
                    time.sleep(0.2)

    def make_with_signal(cfg, *a, callbacks=None, **kw):
        fits.append(1)
        return make(cfg, *a, callbacks=[*(callbacks or []), SigtermAtFirstBatch()], **kw)

    monkeypatch.setattr("fedlab.methods.client.make_trainer", make_with_signal)
    cfg = load_config(ROOT / "experiments/defaults.yaml", RUN + track("cut"))
    with interrupt.handlers(), pytest.raises(interrupt.Interrupted) as e:
        run_experiment(cfg, progress=False)
    stopped_after = 2 if signals == 1 else 1
    assert e.value.signum == signal.SIGTERM and e.value.after_round == stopped_after and e.value.exit_code == 143
    # one signal: round 2's three fits all ran to their end; two: the first of them was its last
    assert "signalled" in fits and fits.count(1) == (6 if signals == 1 else 4)
    assert federation.load_checkpoint(federation.run_dir(cfg) / "checkpoint.pt")["round"] == stopped_after
    monkeypatch.setattr("fedlab.methods.client.make_trainer", make)
    done = run_experiment(load_config(ROOT / "experiments/defaults.yaml", RUN + track("cut") + ["resume=true"]),
                          progress=False)
    differ = {k: (v, done.final.get(k)) for k, v in whole.final.items() if not k.startswith("time/") and done.final.get(k) != v}
    assert not differ, differ
