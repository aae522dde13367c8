"""The run's time split summed from its rounds, with what the rounds' timers leave to the run: the rounds'
logging (bookkeeping) and the end-of-run models (evaluation)."""
from __future__ import annotations


def test_the_split_counts_logging_as_bookkeeping_and_the_end_of_run_models_as_evaluation():
    from fedlab.runtime.federation import time_split

    rounds = [{"round": 0, "time/eval": 1.0, "time/server": 0.5},
              {"round": 1, "time/clients": 2.0, "time/server": 0.25, "time/eval": 1.0, "time/bookkeeping": 0.125}]
    assert time_split(rounds, logging_s=0.5, end_models_s=3.0) == {
        "time/total_clients": 2.0, "time/total_server": 0.75, "time/total_eval": 5.0, "time/total_bookkeeping": 0.625}
