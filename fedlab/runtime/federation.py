"""The federation loop. It knows nothing of Ray and nothing of any method: each round it hands the method a
`RoundContext` (its door to the clients), lets the method run its round, evaluates on evaluation rounds,
checkpoints and records. `resume=true` continues a killed run where its last checkpoint left it."""
from __future__ import annotations

import hashlib
import json
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from fedlab import interrupt
from fedlab.config import to_yaml
from fedlab.runtime import overlap
from fedlab.runtime.context import FederationError, RoundContext, log_line
from fedlab.runtime.resident import clear_residents

__all__ = ["FederationError", "History", "run_dir", "run_federation", "run_key"]


@dataclass
class History:
    rounds: list[dict] = field(default_factory=list)   # one metrics dict per evaluated round (round 0 = zero-shot)
    final: dict = field(default_factory=dict)
    run_id: str | None = None
    experiment_id: str | None = None
    out_dir: str | None = None
    columns: tuple = ()          # the method's extra table columns (FedMethod.table_columns)
    headline: str = "acc/mean"   # the method's headline metric (FedMethod.headline)
    backend: dict = field(default_factory=dict)   # where the clients ran: workers, nodes
    models: dict = field(default_factory=dict)    # model name -> what identifies its weights (zoo recipe, sha256)
    environment: dict = field(default_factory=dict)   # numerics, libraries, source (fedlab.evidence.provenance)
    diff: str = ""               # the uncommitted changes the run was made with ('' from a clean tree)

    def metric(self, name: str) -> list[tuple[int, float]]:
        return [(r["round"], r[name]) for r in self.rounds if name in r]


def run_key(cfg) -> str:
    """The run's identity (its folder name and the key a table record is checked against): a hash of the
    config's non-default fields (`ExperimentConfig.identity`), without resume and the run's display name."""
    d = cfg.identity()
    d.pop("resume", None)
    d.get("tracking", {}).pop("run_name", None)
    d.get("eval", {}).pop("cache", None)     # where scores come from, not what they are
    d.get("eval", {}).pop("overlap", None)   # when scores are computed, not what they are
    if d.get("eval") == {}:
        d.pop("eval")
    if not d.get("plugins"):
        d.pop("plugins", None)
    return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()[:10]


def run_dir(cfg) -> Path:
    return Path(cfg.output_dir) / f"{cfg.method.name}-{run_key(cfg)}"


def _save_checkpoint(path: Path, payload: dict) -> None:
    """Write the round's checkpoint atomically; the previous round's stays beside it (`checkpoint.prev.pt`)
    for a resume to fall back to if the newest one is damaged."""
    tmp = path.with_suffix(".tmp")
    torch.save(payload, tmp)
    if path.exists():
        path.replace(previous_checkpoint(path))
    tmp.replace(path)


def previous_checkpoint(path: Path) -> Path:
    return path.with_name(path.stem + ".prev" + path.suffix)


def load_checkpoint(path: Path) -> dict:
    """The newest readable checkpoint: `path`, else the previous round's (said on stderr); one line naming
    the file when neither can be read."""
    from fedlab.validation import ConfigError

    problems = []
    for candidate in (path, previous_checkpoint(path)):
        if not candidate.exists():
            continue
        try:
            ck = torch.load(candidate, weights_only=False)
            if not isinstance(ck, dict) or "round" not in ck:
                raise ValueError("not a fedlab checkpoint")
        except Exception as e:  # truncated, corrupt or foreign: try the previous round's
            why = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            problems.append(f"{candidate} is unreadable ({why})")
            continue
        if problems:
            log_line(f"[fedlab] {problems[0]}; resuming from the previous round's checkpoint {candidate}")
        return ck
    raise ConfigError(f"resume: {'; '.join(problems)}; no earlier checkpoint to fall back to — delete "
                      f"{path.parent} to start the run over")


def _progress(method, m: dict, rounds: int, seconds: float) -> str:
    """One line per round: the method's progress metrics (those this round has), bytes each way, time."""
    shown = [f"{label} {m[key]:.4f}" for label, key in method.progress_metrics.items() if m.get(key) is not None]
    return "  ".join([f"[fedlab] round {m['round']}/{rounds}", *shown,
                      f"up {m.get('bytes/up', 0) / 1e6:.2f} MB", f"down {m.get('bytes/down', 0) / 1e6:.2f} MB",
                      f"{seconds:.1f}s"])


TIME_PARTS = (("clients", "client fits"), ("server", "server (aggregation, the method's server steps)"),
              ("eval", "evaluation"), ("bookkeeping", "checkpoints and logging"))


def time_split(rounds: list[dict]) -> dict:
    """Where a run's time went, summed over its rounds (zero-shot evaluation included):
    `time/total_<part>` seconds for each of TIME_PARTS."""
    return {f"time/total_{k}": sum(r.get(f"time/{k}", 0.0) for r in rounds) for k, _ in TIME_PARTS}


def format_time_split(final: dict) -> str | None:
    """One line: each part's seconds and share of their sum (None when the run has no split)."""
    parts = [(label, final.get(f"time/total_{k}")) for k, label in TIME_PARTS]
    if any(v is None for _, v in parts):
        return None
    total = sum(v for _, v in parts) or 1.0
    return "time: " + " · ".join(f"{label} {v:.1f}s ({100 * v / total:.0f} %)" for label, v in parts)


def _logged_round(marker: Path) -> int:
    """The last round the tracker got (the run folder's `logged_round`); a damaged marker means "none": the
    resumed run logs every checkpointed round again (said on stderr)."""
    try:
        return int(marker.read_text().strip())
    except (OSError, ValueError):
        log_line(f"[fedlab] {marker} is damaged: logging every checkpointed round to MLflow again")
        return -1


def _beside_evaluator(cfg, method, num_clients: int):
    """The second process of `eval.overlap` (None when it is off, or cannot apply: said once)."""
    if not cfg.eval.overlap or not method.trains:
        return None
    why = overlap.why_not(cfg, method)
    if why:
        log_line(f"[fedlab] eval.overlap: evaluating in line: {why}")
        return None
    return overlap.BesideEvaluator(cfg, list(range(num_clients)))


def run_federation(method, backend, cfg, tracker=None, progress: bool = True) -> History:
    from fedlab.tracking import NullTracker

    tracker = tracker or NullTracker()
    out = run_dir(cfg)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.yaml").write_text(to_yaml(cfg))
    ckpt_path = out / "checkpoint.pt"
    if tracker.run_id:
        (out / "mlflow_run_id").write_text(tracker.run_id)
    # the last round whose metrics reached the tracker: a resumed run logs only what is missing
    marker = out / "logged_round"
    logged = _logged_round(marker) if cfg.resume and marker.exists() else -1

    def log_round(metrics: dict) -> None:
        nonlocal logged
        if metrics["round"] > logged:
            tracker.log_metrics({k: v for k, v in metrics.items() if k != "eval/pending"}, step=metrics["round"])
            logged = metrics["round"]
            marker.write_text(str(logged))

    history = History(run_id=tracker.run_id, experiment_id=tracker.experiment_id, out_dir=str(out),
                      columns=tuple(method.table_columns), headline=method.headline)
    num_clients = method.data.num_clients
    rounds = cfg.federation.rounds if method.trains else 0
    torch.set_num_threads(cfg.backend.threads)  # server-side compute too: same numbers on every backend
    # residents of an earlier run in this process may carry what that run wrote into their base weights
    # (a server-side re-alignment sent to the clients): every run starts from freshly built ones, as a new
    # worker process would
    clear_residents()
    beside = None      # the second process of eval.overlap (fedlab/runtime/overlap.py), when it applies

    def context(rnd: int) -> RoundContext:
        return RoundContext(rnd, backend, cfg, num_clients, method, tracker, out)

    def beside_off() -> None:
        nonlocal beside
        if beside is not None:
            beside.close()
        beside = None

    def put_scores(rnd_done: int, metrics: dict) -> dict:
        """Scores of an evaluated round that came after its record (beside training, or on resume): into the
        record and the tracker; returns the record."""
        rec = next(r for r in history.rounds if r["round"] == rnd_done)
        rec.update(metrics)
        rec.pop("eval/pending", None)
        tracker.log_metrics(metrics, step=rnd_done)
        return rec

    def score_in_line(rnd_done: int, instructions: dict, tasks) -> dict:
        """An evaluation meant for the second process, scored here (its answers in the second process's form)."""
        if tasks is None:
            return context(rnd_done).evaluate(instructions)
        return {t: context(rnd_done).evaluate(overlap.asking(instructions, [t])) for t in tasks}

    def merge(wait_until: int | None, current: int | None = None):
        """Merges the evaluations answered so far (with `wait_until` = n, after waiting until at most n are
        unanswered) into their rounds' records and the tracker, and scores in line what a lost second process
        left; the answers for round `current` (not in the history yet) are returned as (answers, seconds)."""
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
                got, seconds, where = score_in_line(rnd_done, instructions, tasks), None, "in line"
            if rnd_done == current:
                mine = (got, seconds)
                continue
            metrics = overlap.summarize(rnd_done, got)
            if seconds is not None:
                metrics["time/eval_beside"] = seconds
            put_scores(rnd_done, metrics)
            if progress:
                shown = [f"{label} {metrics[key]:.4f}" for label, key in method.progress_metrics.items()
                         if key in metrics]
                log_line(f"[fedlab] round {rnd_done}/{rounds} scored {where}: " + "  ".join(shown))
        if lost:
            log_line("[fedlab] eval.overlap: the evaluation process is gone; evaluating in line from here")
            beside_off()
        return mine

    def evaluate_round(rnd_now: int, ctx, last: bool) -> dict:
        """Round `rnd_now`'s evaluation. Without `eval.overlap`: in line. With it: sent to the second process
        (its metrics come later, `eval/pending` until then; at most two in flight), or — the last round, which
        nothing follows — every other task scored there and the rest here at the same time."""
        instructions = method.configure_evaluate(rnd_now, ctx.clients) if beside is not None else {}
        if beside is None or any(ins.state is None for ins in instructions.values()):
            return method.evaluate(rnd_now, ctx)
        if not last:
            merge(wait_until=overlap.MAX_IN_FLIGHT - 1)       # back-pressure: the oldest answered first
            if beside is not None and beside.submit(rnd_now, instructions):
                return {"eval/pending": True}
            if beside is not None:
                beside.pending.pop(rnd_now, None)
                merge(wait_until=0)               # lost: what it had not answered is scored here
            return method.evaluate(rnd_now, ctx)
        tasks = {c: method.data.client_tasks(c) for c in instructions}
        there, here = overlap.split_tasks(tasks)
        if not there:
            return method.evaluate(rnd_now, ctx)
        beside.submit(rnd_now, instructions, there)           # if lost, `merge` scores its half here
        mine = {t: ctx.evaluate(overlap.asking(instructions, [t])) for t in here}
        theirs, seconds = merge(wait_until=0, current=rnd_now)
        out = overlap.summarize(rnd_now, overlap.joined({**theirs, **mine}, tasks, rnd_now))
        return out if seconds is None else {**out, "time/eval_beside": seconds}

    completed = 0                       # the last round whose checkpoint is written (0: none yet)
    try:        # whatever fails or stops the run, no second process is left behind (except below)
        beside = _beside_evaluator(cfg, method, num_clients)   # started first: it imports and builds while we do
        backend.start(cfg, num_clients)
        history.backend = backend.describe()
        tracker.set_tags({f"fedlab.backend.{k}": v for k, v in history.backend.items()})
        start = 1
        method.setup()
        if cfg.resume and (ckpt_path.exists() or previous_checkpoint(ckpt_path).exists()):
            ck = load_checkpoint(ckpt_path)
            method.load_state_dict(ck["method"])
            backend.set_client_states(ck["client_states"])
            history.rounds = ck["history"]
            start = ck["round"] + 1
            random.setstate(ck["py_rng"])
            if "torch_rng" in ck:
                torch.set_rng_state(ck["torch_rng"])
            for past in history.rounds:      # rounds checkpointed but killed before they were logged
                log_round(past)
            log_line(f"[fedlab] resuming {out} after round {ck['round']}")
            for rnd_done, (instructions, _) in sorted(ck.get("pending_eval", {}).items()):
                # being scored beside training when the run was killed: scored here from the saved instructions
                t0 = time.perf_counter()
                rec = put_scores(rnd_done, overlap.summarize(rnd_done, context(rnd_done).evaluate(instructions)))
                rec["time/eval"] = rec.get("time/eval", 0.0) + time.perf_counter() - t0
        t_run = time.perf_counter()

        if start == 1:
            t0 = time.perf_counter()
            ctx = context(0)
            m = {"round": 0, **evaluate_round(0, ctx, last=rounds == 0)}
            m["time/eval"] = time.perf_counter() - t0
            if method.trains:
                method.begin(ctx)
            m.update(ctx.round_metrics())
            history.rounds.append(m)
            log_round(m)
            if progress:
                log_line(_progress(method, m, rounds, time.perf_counter() - t0) + "  (zero-shot)")
            interrupt.check("before round 1 completed")
        completed = start - 1
        for rnd in range(start, rounds + 1):
            t0 = time.perf_counter()
            ctx = context(rnd)
            ctx.log({"bytes/down": 0, "bytes/up": 0})
            method.run_round(rnd, ctx)
            stop = method.should_stop(rnd)
            m = {"round": rnd, **ctx.round_metrics()}
            m["time/fit_round"] = time.perf_counter() - t0
            m["time/clients"] = ctx.client_s
            m["time/server"] = m["time/fit_round"] - ctx.client_s
            last = rnd == rounds or stop
            due = rnd % cfg.eval.every == 0 or last
            t_eval = time.perf_counter()
            if beside is not None:
                merge(wait_until=None)      # scores of earlier rounds that have arrived
            if due:
                m.update(evaluate_round(rnd, ctx, last))
            if due or beside is not None:
                m["time/eval"] = time.perf_counter() - t_eval
            t_book = time.perf_counter()
            m["time/round"] = t_book - t0        # training and evaluation; bookkeeping is added below
            history.rounds.append(m)
            _save_checkpoint(ckpt_path, {"round": rnd, "method": method.state_dict(),
                                         "client_states": backend.get_client_states(), "history": history.rounds,
                                         "py_rng": random.getstate(), "torch_rng": torch.get_rng_state(),
                                         "run_id": tracker.run_id,
                                         # evaluations still beside training: scored on resume if the run dies
                                         "pending_eval": dict(beside.pending) if beside is not None else {}})
            completed = rnd
            m["time/bookkeeping"] = time.perf_counter() - t_book     # checkpoint (its own record lacks this key)
            log_round(m)
            if progress:
                log_line(_progress(method, m, rounds, m["time/round"]))
            interrupt.stop_point(rnd)       # a stop asked for by SIGINT / SIGTERM: here, the round checkpointed
            if stop:
                log_line(f"[fedlab] stopped after round {rnd} of {rounds}: the method's stopping rule was met")
                break
        if beside is not None:
            merge(wait_until=0)     # the last round was scored here and there; nothing should be left
            beside_off()
    except BaseException as e:
        beside_off()
        if isinstance(e, interrupt.Interrupted) and e.after_round is None and completed > 0:
            e.after_round = completed       # a second signal cut a round short: the last checkpoint stands
        raise
    end = method.finalize(context(rounds))
    numbers = {k: v for k, v in end.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    if numbers:      # the end-of-run metrics (fused or routed models) reach the tracker at the last round
        tracker.log_metrics(numbers, step=rounds)
    words = {f"fedlab.final.{k}": str(v) for k, v in end.items() if k not in numbers}
    if words:
        tracker.set_tags(words)
    history.final = {**history.rounds[-1], **end}
    history.final["time/total"] = time.perf_counter() - t_run
    split = time_split(history.rounds)
    history.final.update(split)
    tracker.log_metrics(split, step=rounds)
    backend.shutdown()
    return history
