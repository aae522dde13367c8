"""A run's evaluation and its record: `RunLog` writes each round's metrics to the tracker once (a resumed run logs
only what is missing) and puts scores that come late into their round's record; `Evaluation` scores an
evaluation round in line, or — with `eval.overlap` — in a second process while the next round trains
(`fedlab.runtime.overlap`), merging its answers into their rounds as they arrive and scoring in line what a lost
second process left."""
from __future__ import annotations

import time
from pathlib import Path

from fedlab.files import write_atomic
from fedlab.runtime import overlap
from fedlab.runtime.context import log_line


def _logged_round(marker: Path) -> int:
    """The last round the tracker got (the run folder's `logged_round`); a damaged marker means "none": the
    resumed run logs every checkpointed round again (said on stderr)."""
    try:
        return int(marker.read_text().strip())
    except (OSError, ValueError):
        log_line(f"[fedlab] {marker} is damaged: logging every checkpointed round to MLflow again")
        return -1


class RunLog:
    """The rounds' metrics on their way to the tracker and into the history's records."""

    def __init__(self, cfg, tracker, out: Path, history):
        self.tracker, self.history = tracker, history
        self.marker = out / "logged_round"
        self.logged = _logged_round(self.marker) if cfg.resume and self.marker.exists() else -1
        self.seconds = 0.0      # what the rounds' records took to reach the tracker, in this process

    def round(self, metrics: dict) -> None:
        """A round's record to the tracker, unless it got it before (a resumed run)."""
        t0 = time.perf_counter()
        if metrics["round"] > self.logged:
            self.tracker.log_metrics({k: v for k, v in metrics.items() if k != "eval/pending"}, step=metrics["round"])
            self.logged = metrics["round"]
            write_atomic(self.marker, str(self.logged))     # a kill mid-write leaves the last round's marker
        self.seconds += time.perf_counter() - t0

    def scores(self, rnd_done: int, metrics: dict) -> dict:
        """Scores of an evaluated round that came after its record (beside training, or on resume): into the
        record and the tracker; returns the record."""
        rec = next(r for r in self.history.rounds if r["round"] == rnd_done)
        rec.update(metrics)
        rec.pop("eval/pending", None)
        self.tracker.log_metrics(metrics, step=rnd_done)
        return rec


def beside_evaluator(cfg, method, num_clients: int):
    """The second process of `eval.overlap` (None when it is off, or cannot apply: said once)."""
    if not cfg.eval.overlap or not method.trains:
        return None
    why = overlap.why_not(cfg, method)
    if why:
        log_line(f"[fedlab] eval.overlap: evaluating in line: {why}")
        return None
    return overlap.BesideEvaluator(cfg, list(range(num_clients)))


class Evaluation:
    """The evaluation rounds of a run: `score` a round, `arrived` merges what the second process answered,
    `finish` waits for the rest and stops it, `pending` is what a checkpoint keeps of scores still beside."""

    def __init__(self, cfg, method, context, log: RunLog, rounds: int, progress: bool):
        self.cfg, self.method, self.context, self.log = cfg, method, context, log
        self.rounds, self.progress = rounds, progress
        self.beside = None

    def start(self, num_clients: int) -> None:
        self.beside = beside_evaluator(self.cfg, self.method, num_clients)   # imports and builds while we do

    def off(self) -> None:
        if self.beside is not None:
            self.beside.close()
        self.beside = None

    def pending(self) -> dict:
        return dict(self.beside.pending) if self.beside is not None else {}

    def arrived(self) -> None:
        """The scores of earlier rounds that have arrived from the second process."""
        if self.beside is not None:
            self.merge(wait_until=None)

    def finish(self) -> None:
        """The last round was scored here and there; nothing should be left."""
        if self.beside is not None:
            self.merge(wait_until=0)
            self.off()

    def resumed(self, pending_eval: dict) -> None:
        """Evaluations being scored beside training when the run was killed: scored here from their instructions."""
        for rnd_done, (instructions, _) in sorted(pending_eval.items()):
            t0 = time.perf_counter()
            rec = self.log.scores(rnd_done, overlap.summarize(rnd_done, self.context(rnd_done).evaluate(instructions)))
            rec["time/eval"] = rec.get("time/eval", 0.0) + time.perf_counter() - t0

    def _in_line(self, rnd_done: int, instructions: dict, tasks) -> dict:
        """An evaluation meant for the second process, scored here (its answers in the second process's form)."""
        if tasks is None:
            return self.context(rnd_done).evaluate(instructions)
        return {t: self.context(rnd_done).evaluate(overlap.asking(instructions, [t])) for t in tasks}

    def merge(self, wait_until: int | None, current: int | None = None):
        """Merges the evaluations answered so far (with `wait_until` = n, after waiting until at most n are
        unanswered) into their rounds' records and the tracker, and scores in line what a lost second process
        left; the answers for round `current` (not in the history yet) are returned as (answers, seconds)."""
        beside = self.beside
        beside.receive(wait_until)
        answers = {r: (got, seconds) for r, got, seconds in beside.inbox}
        beside.inbox.clear()
        lost = beside.lost
        mine = None
        for rnd_done in sorted(beside.pending):
            if rnd_done not in answers and not lost:
                continue
            instructions, tasks = beside.pending.pop(rnd_done)
            got, seconds = answers.get(rnd_done, (None, None))
            if got is not None and overlap.all_failed(got):
                log_line(f"[fedlab] round {rnd_done}: every client failed to evaluate in the second process; "
                         "scoring in line")
                got = None
            where = "beside training"
            if got is None:
                got, seconds, where = self._in_line(rnd_done, instructions, tasks), None, "in line"
            if rnd_done == current:
                mine = (got, seconds)
                continue
            metrics = overlap.summarize(rnd_done, got)
            if seconds is not None:
                metrics["time/eval_beside"] = seconds
            self.log.scores(rnd_done, metrics)
            if self.progress:
                shown = [f"{label} {metrics[key]:.4f}" for label, key in self.method.progress_metrics.items()
                         if key in metrics]
                log_line(f"[fedlab] round {rnd_done}/{self.rounds} scored {where}: " + "  ".join(shown))
        if lost:
            log_line("[fedlab] eval.overlap: the evaluation process is gone; evaluating in line from here")
            self.off()
        return mine

    def score(self, rnd_now: int, ctx, last: bool) -> dict:
        """Round `rnd_now`'s evaluation. Without `eval.overlap`: in line. With it: sent to the second process
        (its metrics come later, `eval/pending` until then; at most two in flight), or — the last round, which
        nothing follows — every other task scored there and the rest here at the same time."""
        method = self.method
        instructions = method.configure_evaluate(rnd_now, ctx.clients) if self.beside is not None else {}
        if self.beside is None or any(ins.state is None for ins in instructions.values()):
            return method.evaluate(rnd_now, ctx)
        if not last:
            self.merge(wait_until=overlap.MAX_IN_FLIGHT - 1)       # back-pressure: the oldest answered first
            if self.beside is not None and self.beside.submit(rnd_now, instructions):
                return {"eval/pending": True}
            if self.beside is not None:
                self.beside.pending.pop(rnd_now, None)
                self.merge(wait_until=0)               # lost: what it had not answered is scored here
            return method.evaluate(rnd_now, ctx)
        tasks = {c: method.data.client_tasks(c) for c in instructions}
        there, here = overlap.split_tasks(tasks)
        if not there:
            return method.evaluate(rnd_now, ctx)
        self.beside.submit(rnd_now, instructions, there)      # if lost, `merge` scores its half here
        mine = {t: ctx.evaluate(overlap.asking(instructions, [t])) for t in here}
        theirs, seconds = self.merge(wait_until=0, current=rnd_now)
        out = overlap.summarize(rnd_now, overlap.joined({**theirs, **mine}, tasks, rnd_now))
        return out if seconds is None else {**out, "time/eval_beside": seconds}
