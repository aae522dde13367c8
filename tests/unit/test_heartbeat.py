"""Progress lines while a round runs (`fedlab.runtime.heartbeat`): a long evaluation is not silence."""
import time

import pytest

from fedlab.runtime import heartbeat
from fedlab.runtime.heartbeat import Heartbeat


def test_a_round_says_what_it_does_and_for_how_long_until_it_ends(capsys):
    beat = Heartbeat(rounds=3, on=True, every=0.05)
    with beat.round(2, "training"):
        time.sleep(0.12)
        beat.phase("evaluating")
        time.sleep(0.12)
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("[fedlab] round 2/3: training (") and lines[0].endswith("s so far)")
    assert lines[-1].startswith("[fedlab] round 2/3: evaluating (")
    time.sleep(0.12)
    assert capsys.readouterr().err == ""                    # the block has ended: no line after it


def test_a_run_without_progress_lines_gets_none(capsys):
    with Heartbeat(rounds=1, on=False, every=0.01).round(1, "training"):
        time.sleep(0.05)
    assert capsys.readouterr().err == ""


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
