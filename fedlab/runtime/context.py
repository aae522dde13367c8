"""`RoundContext`: a method's only door to its clients and to the tracker during one round.

`ctx.fit(instructions)` sends each client its instruction and returns the usable answers; behind it the
uploads are screened (stale rounds, duplicate ids, non-finite values, the method's own `check_upload`),
`federation.min_clients` is enforced, failures are reported, and bytes each way are counted.
`ctx.submit(instructions)` returns a `Pending` whose `wait(n)` hands back answers as they arrive (what
asynchronous aggregation needs). `ctx.evaluate`, `ctx.log` (the round's metrics), `ctx.log_artifact` and
`ctx.tracker` complete it. The round loop (`fedlab.runtime.federation`) makes one context per round and
reads the round's metrics from it afterwards.
"""
from __future__ import annotations

import random
import sys
import time
from collections import defaultdict
from pathlib import Path

from fedlab.comm.messages import EvalRes, FitRes
from fedlab.seeding import derive_seed


class FederationError(RuntimeError):
    pass


class Diverged(FederationError):
    """Every client's update of a round was non-finite: training diverged (a finding about the settings, not a
    fault of fedlab's)."""


NONFINITE = "non-finite values in "      # the start of screen_uploads' reason for a non-finite upload


def log_line(msg: str) -> None:
    """One line on stderr, written in one call, so that a line another thread writes (a round's progress lines)
    cannot land between the message and its newline."""
    sys.stderr.write(msg + "\n")
    sys.stderr.flush()


def screen_uploads(rnd: int, results: dict, check_upload, asked=None) -> tuple[dict, dict[int, str]]:
    """Bad updates are rejected before aggregation: an answer for the wrong round (stale), one that claims
    another client's id (duplicate) or an unknown one, non-finite values, and whatever the method's own
    `check_upload` finds (wrong keys or shapes). `asked`: the ids asked in this exchange (default: the
    answers' own keys). Returns (accepted results, {cid: reason})."""
    from fedlab.runtime.faults import nonfinite_keys

    asked = set(results) if asked is None else set(asked)
    ok, rejected = {}, {}
    for cid, r in sorted(results.items()):
        reason = None
        if r.cid != cid:   # answers are keyed by the client that was asked: another id is a duplicate
            what = "duplicate" if r.cid in asked else "unknown"
            reason = f"{what} client id (the answer from client {cid} claims to be client {r.cid})"
        elif r.round != rnd:
            reason = f"stale round {r.round} (expected {rnd})"
        else:
            bad = nonfinite_keys(r.state) + nonfinite_keys(r.aux)
            reason = f"{NONFINITE}{bad[:3]}" if bad else check_upload(r)
        if reason:
            rejected[cid] = reason
        else:
            ok[cid] = r
    return ok, rejected


class RoundContext:
    """One round's door to the clients (see the module docstring). Attributes: `round`, `cfg`, `clients`
    (every client id), `tracker`, `out_dir` (the run's folder), `metrics` (what the round logs)."""

    def __init__(self, rnd: int, backend, cfg, num_clients: int, method, tracker, out_dir: str | Path):
        self.round, self.cfg, self.backend, self.method = rnd, cfg, backend, method
        self.clients = list(range(num_clients))
        self.tracker, self.out_dir = tracker, Path(out_dir)
        self.metrics: dict = {}
        self.client_s = 0.0       # wall seconds this round spent waiting for clients' fits (the time split)
        self._losses: dict[str, list] = defaultdict(list)
        self._ok_clients: set[int] = set()
        self.rejections: list[str] = []      # why each rejected upload of this round was refused

    # ------------------------------------------------------------------ clients
    def sample(self) -> list[int]:
        """This round's clients: `federation.client_fraction` of them, drawn by (seed, round)."""
        n = len(self.clients)
        rng = random.Random(derive_seed(self.cfg.seed, "sample", self.round))
        k = max(1, round(self.cfg.federation.client_fraction * n))
        return sorted(rng.sample(self.clients, k)) if k < n else list(self.clients)

    def fit(self, instructions: dict) -> dict[int, FitRes]:
        """Send every instruction, wait for every answer; the usable ones, by client id."""
        pending = self.submit(instructions)
        pending.wait()
        return pending.results

    def submit(self, instructions: dict) -> Pending:
        """Send every instruction now; collect answers with `Pending.wait` as they arrive."""
        self.metrics["bytes/down"] = self.metrics.get("bytes/down", 0) + sum(i.nbytes() for i in instructions.values())
        t0 = time.perf_counter()
        stream = self.backend.stream("fit", instructions)
        self.client_s += time.perf_counter() - t0
        return Pending(self, instructions, stream)

    def evaluate(self, instructions: dict) -> dict[int, EvalRes]:
        out = {}
        for cid, r in self.backend.stream("evaluate", instructions):
            if isinstance(r, EvalRes):
                out[cid] = r
            else:
                log_line(f"[fedlab] round {self.round}: client {cid} failed to evaluate: {r.error}")
        return dict(sorted(out.items()))

    # ------------------------------------------------------------------ bookkeeping of answers
    def _account(self, answered: dict, failed: dict, asked) -> dict:
        for cid, f in failed.items():
            log_line(f"[fedlab] round {self.round}: client {cid} failed: {f.error}")
        ok, rejected = screen_uploads(self.round, answered, self.method.check_upload, asked)
        for cid, why in rejected.items():
            log_line(f"[fedlab] round {self.round}: rejected the upload of client {cid}: {why}")
        self.rejections.extend(rejected.values())
        m = self.metrics
        m["rejected"] = m.get("rejected", 0) + len(rejected)
        m["clients/failed"] = m.get("clients/failed", 0) + len(failed)
        self._ok_clients.update(ok)
        m["clients/ok"] = len(self._ok_clients)
        m["bytes/up"] = m.get("bytes/up", 0) + sum(r.nbytes() for r in answered.values())
        keep = self.method.per_client_metrics
        for r in ok.values():
            for key, v in r.metrics.items():
                self._losses[key].append(v)
                if key in keep:
                    m[f"{key}_client_{r.cid}"] = v
        return ok

    # ------------------------------------------------------------------ tracking
    def log(self, metrics: dict, prefix: str = "") -> None:
        """Add metrics to this round's record (logged once the round ends)."""
        self.metrics.update({f"{prefix}{k}": v for k, v in metrics.items()})

    def log_artifact(self, path, artifact_path: str | None = None) -> None:
        self.tracker.log_artifact(path, artifact_path)

    def round_metrics(self) -> dict:
        """The round's record: everything logged, plus the mean over clients of each metric they reported."""
        return {**self.metrics, **{k: sum(v) / len(v) for k, v in self._losses.items()}}


class Pending:
    """Answers to instructions already sent, collected as they arrive (`wait`). Accepted answers
    accumulate in `results`; once every answer is in, fewer usable ones than `federation.min_clients`
    (or than were asked, if fewer) fail the round."""

    def __init__(self, ctx: RoundContext, instructions: dict, stream):
        self.ctx, self.asked, self._stream = ctx, dict(instructions), iter(stream)
        self.results: dict[int, FitRes] = {}
        self.arrived = 0
        self._failed = 0
        self._rejected = 0

    @property
    def done(self) -> bool:
        return self.arrived == len(self.asked)

    def wait(self, n: int | None = None) -> dict[int, FitRes]:
        """Block until `n` more answers (usable or not; None: all the rest) have arrived; returns the
        usable ones among them."""
        answered, failed = {}, {}
        while not self.done and (n is None or len(answered) + len(failed) < n):
            t0 = time.perf_counter()
            cid, r = next(self._stream)      # in-process: the client's fit runs here; on Ray: waiting for it
            self.ctx.client_s += time.perf_counter() - t0
            self.arrived += 1
            (answered if isinstance(r, FitRes) else failed)[cid] = r
        if not answered and not failed:
            return {}
        before = self.ctx.metrics.get("rejected", 0)
        ok = self.ctx._account(answered, failed, self.asked)
        self._rejected += self.ctx.metrics["rejected"] - before
        self._failed += len(failed)
        self.results.update(ok)
        if self.done:
            self._check_enough()
        return ok

    def _check_enough(self) -> None:
        need = min(self.ctx.cfg.federation.min_clients, len(self.asked))
        reasons = self.ctx.rejections
        if not self.results and not self._failed and reasons and all(r.startswith(NONFINITE) for r in reasons):
            lr = self.ctx.cfg.federation.lr
            raise Diverged(f"round {self.ctx.round}: every client's update was non-finite ({len(reasons)} of "
                           f"{len(self.asked)}): training diverged; lower federation.lr (now {lr:g}) or the "
                           "method's own learning rates")
        if len(self.results) < need:
            raise FederationError(
                f"round {self.ctx.round}: only {len(self.results)} of {len(self.asked)} clients gave a usable "
                f"answer ({self._failed} failed, {self._rejected} rejected); "
                f"federation.min_clients={self.ctx.cfg.federation.min_clients}")
