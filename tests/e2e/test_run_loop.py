"""The round loop's units on their own: the run's log (each round to the tracker once, a resumed run logging only
what is missing, late scores into their record) and the resume of a fresh run."""
from types import SimpleNamespace

from fedlab.runtime.evaluation import RunLog
from fedlab.runtime.federation import History, _resume


class Tracker:
    def __init__(self):
        self.logged = []

    def log_metrics(self, metrics, step):
        self.logged.append((step, dict(metrics)))


def test_each_round_reaches_the_tracker_once_and_late_scores_join_their_record(tmp_path):
    history, tracker = History(), Tracker()
    log = RunLog(SimpleNamespace(resume=False), tracker, tmp_path, history)
    history.rounds = [{"round": 1, "acc": 0.5, "eval/pending": True}, {"round": 2, "acc": 0.6}]
    for r in history.rounds:
        log.round(r)
    log.round(history.rounds[0])                          # again: not logged twice
    assert [s for s, _ in tracker.logged] == [1, 2] and "eval/pending" not in tracker.logged[0][1]
    assert (tmp_path / "logged_round").read_text() == "2"
    rec = log.scores(1, {"acc/mean": 0.7})
    assert rec == {"round": 1, "acc": 0.5, "acc/mean": 0.7} and tracker.logged[-1] == (1, {"acc/mean": 0.7})
    # a resumed run starts from the marker: rounds up to 2 are not logged again, round 3 is
    again = Tracker()
    resumed = RunLog(SimpleNamespace(resume=True), again, tmp_path, history)
    resumed.round({"round": 2, "acc": 0.6})
    resumed.round({"round": 3, "acc": 0.8})
    assert [s for s, _ in again.logged] == [3]


def test_a_fresh_run_or_one_without_a_checkpoint_resumes_nothing(tmp_path):
    cfg = SimpleNamespace(resume=True)
    assert _resume(cfg, None, None, History(), None, None, tmp_path / "checkpoint.pt") == 0
    assert _resume(SimpleNamespace(resume=False), None, None, History(), None, None, tmp_path / "x.pt") == 0
