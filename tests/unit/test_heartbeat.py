"""Progress lines while a round runs (`fedlab.runtime.heartbeat`): a long evaluation is not silence."""
import threading

import pytest

from fedlab.runtime import heartbeat
from fedlab.runtime.heartbeat import Heartbeat


@pytest.fixture()
def lines(monkeypatch):
    """The lines the heartbeat writes, and an event set at each."""
    got: list[str] = []
    said = threading.Event()

    def log_line(msg):
        got.append(msg)
        said.set()

    monkeypatch.setattr(heartbeat, "log_line", log_line)
    return got, said


def _beating() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("fedlab-heartbeat-")]


def test_a_round_says_what_it_does_and_for_how_long_until_it_ends(lines):
    got, said = lines
    beat = Heartbeat(rounds=3, on=True, every=0.01)
    with beat.round(2, "training"):
        assert said.wait(10)
        beat.phase("evaluating")
        n = len(got)
        while len(got) == n:
            said.clear()
            assert said.wait(10)
    assert got[0].startswith("[fedlab] round 2/3: training (") and got[0].endswith("s so far)")
    assert got[-1].startswith("[fedlab] round 2/3: evaluating (")
    assert not _beating()                                   # the block has ended: its thread with it
    said.clear()
    assert not said.wait(0.05)                              # and no line after it


def test_the_lines_stop_when_the_round_fails():
    beat = Heartbeat(rounds=1, on=True, every=0.01)
    with pytest.raises(RuntimeError), beat.round(1, "training"):
        assert _beating() == ["fedlab-heartbeat-1"]
        raise RuntimeError("a client failed")
    assert not _beating()


def test_a_run_without_progress_lines_gets_none(lines):
    got, _ = lines
    with Heartbeat(rounds=1, on=False, every=0.001).round(1, "training"):
        assert not _beating()
    assert got == []


@pytest.mark.federation
def test_a_run_names_its_zero_shot_evaluation_and_its_training_while_they_run(pico_zoo, tmp_path, monkeypatch,
                                                                               capsys):
    from fedlab.config import load_config
    from fedlab.experiment import run_experiment

    monkeypatch.setattr(heartbeat, "EVERY", 0.001)
    run_experiment(load_config(None, ["model.name=pico-llama", "data.num_clients=2", "data.tasks=[recall,sentiment]",
                                      "data.train_per_task=8", "data.test_per_task=8", "federation.rounds=1",
                                      "tracking.enabled=false", f"output_dir={tmp_path}"]), progress=True)
    err = capsys.readouterr().err
    for what in ("round 0/1: evaluating (zero-shot)", "round 1/1: training", "round 1/1: evaluating"):
        assert f"[fedlab] {what} (" in err, what
