"""The experiment runner behind every table script: a plan of runs, each run once per seed, one record per
run in a resumable `results.json`, and tables rendered from the records alone.

A table script is its plan and its rendering:

    def plan() -> list[Planned]: ...                 # which configs, with which overrides, under which key
    def render(results: Results) -> str: ...         # markdown from the records
    if __name__ == "__main__":
        sys.exit(run_table(HERE, plan, render, title="…"))

`python make_tables.py` runs what `results.json` does not hold yet (a run whose resolved config changed is
run again), writes each record as soon as its run ends (kill it at any moment; run it again to continue),
then renders `RESULTS.md`. `--seeds 0,1,2`, `--only PREFIX` (or `KEY$`, one row exactly), `--rerun`,
`--render-only` and trailing `key=value` overrides for every run; `--merge-from OTHER/results.json` first
takes the records another clone or machine made of the table (`merge_records`, at the end of this module).
Every run is logged to MLflow under one parent run per table.

A record holds what recomputes a table without MLflow: key, label, setting, seed, the resolved method
config, the final and zero-shot metrics, a per-round summary, the script's own summary, the models' zoo
fingerprints and weights' sha256, the command, the MLflow run id, wall time, fedlab's version and git
commit.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from fedlab.stats import fmt_ci

ROOT = Path(__file__).resolve().parents[1]
# the per-round numbers a record keeps (for learning curves): accuracy and generated-answer Rouge-L of the
# clients, of a server LLM and of a server proxy (`dpm/`), the task loss and the bytes each way
ROUND_KEYS = ("acc/mean", "llm/acc/mean", "loss/task", "bytes/up", "bytes/down", "rougeL/mean", "llm/rougeL/mean",
              "dpm/rougeL/mean", "dpm/acc/mean")


@dataclass(frozen=True)
class Planned:
    """One row of a table before seeds: `key` names it in results.json (the seed is appended)."""
    key: str
    config: str | Path | None
    overrides: tuple[str, ...] = ()
    label: str = ""
    setting: str = ""

    def resolve(self, seed: int, extra: tuple[str, ...] = ()):
        """The row's resolved config for one seed, with the trailing overrides `extra` of the command line."""
        from fedlab.config import load_config

        return load_config(self.config, [*self.overrides, *extra, f"seed={seed}"])

    def command(self, seed: int, extra: tuple[str, ...] = ()) -> str:
        cfg = [] if self.config is None else [_rel(self.config)]
        return " ".join(["fedlab run", *cfg, *self.overrides, *extra, f"seed={seed}"])


def _rel(path) -> str:
    p = Path(path).resolve()
    try:
        return str(p.relative_to(ROOT))
    except ValueError:
        return str(p)


def record_key(key: str, seed: int) -> str:
    return f"{key}@seed{seed}"


@contextlib.contextmanager
def _locked(path: Path):
    """An exclusive advisory lock on `path` for the block (POSIX flock; without fcntl, no lock)."""
    try:
        import fcntl
    except ImportError:          # not POSIX: one table process per file
        yield
        return
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


class Results:
    """The records of one table script (`results.json`), written atomically after every run."""

    def __init__(self, path: Path):
        self.path = Path(path)
        data = self._read()
        self.meta: dict = data.get("_meta", {})
        self.records: dict[str, dict] = {k: v for k, v in data.items() if k != "_meta"}
        self._loaded = dict(self.records)      # what this object read, to tell its own writes apart

    def _read(self) -> dict:
        """The file's records ({} when there is none); a damaged file is one line (`fedlab.files`)."""
        if not self.path.exists():
            return {}
        from fedlab.files import read_json

        return read_json(self.path, None, f"restore it with `git checkout -- {self.path}` (it is committed), or "
                                          "move it aside to record the table afresh", dict,
                         "table records {key@seed: record}")

    def save(self) -> None:
        """Write the records atomically, merged with what is on disk now: records this object added or
        replaced win, every other record (another table process on the same file, e.g. a second `--only`)
        is kept, under an exclusive lock on `<file>.lock`."""
        with _locked(self.path.with_suffix(".lock")):
            disk = self._read()
            mine = {k: v for k, v in self.records.items() if self._loaded.get(k) is not v}
            self.records = {**{k: v for k, v in disk.items() if k != "_meta"}, **mine}
            self.meta = {**disk.get("_meta", {}), **self.meta}
            tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps({"_meta": self.meta, **self.records}, indent=1, sort_keys=False))
            tmp.replace(self.path)
            self._loaded = dict(self.records)

    def runs(self, key: str) -> list[dict]:
        """Every seed's record of a row, by seed."""
        rows = [r for r in self.records.values() if r.get("key") == key]
        return sorted(rows, key=lambda r: r.get("seed", 0))

    def values(self, key: str, fn: Callable[[dict], float | None]) -> list[float]:
        return [v for v in (fn(r) for r in self.runs(key)) if v is not None]

    def by_seed(self, key: str, metric: str) -> dict[int, float]:
        """{seed: final[metric]} of a row's records that hold the metric."""
        return {rec["seed"]: rec["final"][metric] for rec in self.runs(key) if metric in rec["final"]}

    def paired(self, a: str, metric_a: str, b: str, metric_b: str | None = None, scale: float = 1.0) -> dict | None:
        """`paired_difference` of scale·metric_a of row a and scale·metric_b of row b over the seeds both
        hold (with their count as "seeds"); None with fewer than two such seeds."""
        x, y = self.by_seed(a, metric_a), self.by_seed(b, metric_b or metric_a)
        seeds = sorted(set(x) & set(y))
        if len(seeds) < 2:
            return None
        from fedlab.stats import paired_difference

        return {**paired_difference([scale * x[s] for s in seeds], [scale * y[s] for s in seeds]),
                "seeds": len(seeds)}

    def cell(self, key: str, fn: Callable[[dict], float | None], digits: int = 3) -> str:
        """'mean ± 95 % half-width' of fn(record) over the row's seeds ('-' when absent)."""
        return fmt_ci(self.values(key, fn), digits)

    def final(self, key: str, metric: str, digits: int = 3) -> str:
        return self.cell(key, lambda r: r["final"].get(metric), digits)

    def constant_answers(self, keys: list[str], prefix: str = "", tasks: list[str] | None = None,
                         share: Callable[[str, str], str] | None = None) -> dict[str, str]:
        """Per task: "constant" when every run of every row in `keys` answered it with one constant answer
        (its answer share = 1.0: no row can be told from another on it), "unknown" when some run has no
        answer share (a record made before fedlab logged it); tasks the rows answer variously are left out.
        By default the tasks are those with a `{prefix}acc/task_<t>` score and the share is
        `{prefix}top/task_<t>` of the runs that scored the task; `tasks` and `share(row key, task)` (the metric
        name of the share of the model a row is scored by) name them instead, every run counting."""
        runs = [(k, rec) for k in keys for rec in self.runs(k)]
        scored = tasks is None
        if scored:
            tasks = sorted({m[len(f"{prefix}acc/task_"):] for _, rec in runs for m in rec["final"]
                            if m.startswith(f"{prefix}acc/task_")})
        share = share or (lambda _key, t: f"{prefix}top/task_{t}")
        out = {}
        for t in tasks:
            shares = [rec["final"].get(share(k, t)) for k, rec in runs
                      if not scored or f"{prefix}acc/task_{t}" in rec["final"]]
            if any(s is None for s in shares):
                out[t] = "unknown"
            elif shares and all(s >= 1.0 for s in shares):
                out[t] = "constant"
        return out

    def stale(self, plan: list[Planned]) -> set[str]:
        """Keys of rows with a record made by another config than the one the script would run now (older
        code or YAML), by other weights, or by other numerics (`stale_numerics`): a table marks them instead
        of presenting them as current."""
        return {p.key for p in plan for rec in self.runs(p.key)
                if stale_reason(rec, p.resolve(rec.get("seed", 0))) is not None}

    def label(self, key: str, default: str = "") -> str:
        runs = self.runs(key)
        return runs[0].get("label", default) if runs else default


class DirtyTree(RuntimeError):
    """A table run asked of a tree with uncommitted changes to files that can change its numbers."""


def check_tree(allow_dirty: bool) -> dict:
    """fedlab's git state before a table runs: a tree with uncommitted changes (or no git checkout) is refused
    unless `allow_dirty` — then every record carries the diff's sha256 and the diff itself is kept."""
    from fedlab.provenance import git_state

    state = git_state()
    if state["clean"] is not True and not allow_dirty:
        what = ("fedlab is not a git checkout, so no record could name its source" if state["commit"] is None else
                f"the working tree has uncommitted changes to {len(state['changed'])} file(s) that can change "
                f"numbers ({', '.join(state['changed'][:4])}{', …' if len(state['changed']) > 4 else ''})")
        raise DirtyTree(f"table: {what}; commit them first, or pass --allow-dirty to record the diff with every "
                        "record (its sha256 in the record, the patch in diffs/ beside results.json and in MLflow)")
    return state


def _git_label(env: dict) -> str | None:
    commit = env.get("commit")
    return None if commit is None else commit + ("" if env.get("clean") else "+dirty")


def constant_answer_note(r: Results, keys: list[str], prefix: str = "", tasks: list[str] | None = None,
                         share: Callable[[str, str], str] | None = None) -> list[str]:
    """Markdown lines under a per-task table: the tasks on which every row gives one constant answer in every
    seed (they cannot separate the rows), and those the records cannot tell (made before the share was logged);
    `tasks` and `share` as in `Results.constant_answers`."""
    flags = r.constant_answers(keys, prefix, tasks, share)
    const = [t for t, v in flags.items() if v == "constant"]
    unknown = [t for t, v in flags.items() if v == "unknown"]
    lines = []
    if const:
        lines.append(f"**Constant answers**: on {', '.join(const)} every row above gives one constant answer in every "
                     "seed — those columns cannot separate the methods.")
    if unknown:
        lines.append(f"Constant-answer check: not possible on {', '.join(unknown)} — some records were made before "
                     "fedlab logged each task's answer share (`top/task_<t>`); re-run them to check.")
    return ["", *lines] if lines else []


def _numbers(metrics: dict) -> dict:
    return {k: v for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool)
            and not k.startswith("time/")}


def make_record(planned: Planned, seed: int, cfg, history, seconds: float, extra: tuple[str, ...],
                summary: dict | None) -> dict:
    import fedlab
    from fedlab.runtime.federation import run_key

    zero = history.rounds[0] if history.rounds else {}
    return {
        "key": planned.key, "label": planned.label, "setting": planned.setting, "seed": seed,
        "method": cfg.method.name, "method_config": dataclasses.asdict(cfg.method), "model": cfg.model.name,
        "config_hash": run_key(cfg), "final": _numbers(history.final),
        "zero": {k: v for k, v in _numbers(zero).items() if any(m in k for m in ("acc", "rougeL/", "em/"))},
        "rounds": [{k: r[k] for k in ("round", *ROUND_KEYS) if k in r} for r in history.rounds],
        "headline": history.headline, "summary": summary, "models": history.models,
        "command": planned.command(seed, extra), "run_id": history.run_id, "seconds": round(seconds, 1),
        "fedlab": fedlab.__version__, "git": _git_label(history.environment),
        "environment": {k: v for k, v in history.environment.items() if k != "changed"},
    }


def keep_diff(folder: Path, record: dict, diff: str) -> None:
    """A dirty tree's patch beside the table's records (`diffs/<sha256 prefix>.patch`), named in the record."""
    sha = (record.get("environment") or {}).get("diff_sha256")
    if not diff or not sha:
        return
    path = Path(folder) / "diffs" / f"{sha[:16]}.patch"
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        path.write_text(diff)
    record["diff"] = str(path.relative_to(folder))


def _parent_run(results: Results, cfg, title: str) -> str | None:
    """One MLflow parent run per table (continued when the script runs again): its runs compare side by side."""
    if not cfg.tracking.enabled:
        return None
    import mlflow

    from fedlab.tracking import setup_mlflow

    setup_mlflow(cfg.tracking.uri, cfg.tracking.artifact_root, cfg.tracking.experiment)
    client = mlflow.MlflowClient()
    known = results.meta.get("parent_run_id")
    if known:
        try:
            client.get_run(known)
            return known
        except mlflow.exceptions.MlflowException:   # another MLflow store: start a new parent there
            pass
    exp = client.get_experiment_by_name(cfg.tracking.experiment)
    run = client.create_run(exp.experiment_id, run_name=f"table: {title}", tags={"fedlab.table": title})
    client.set_terminated(run.info.run_id)
    results.meta["parent_run_id"] = run.info.run_id
    results.save()
    return run.info.run_id


def log_to_parent(results: Results, paths: list[Path], folder: str = "figures") -> int:
    """Figures drawn across a table's runs (means over seeds) logged to the table's MLflow parent run, beside its
    runs; returns how many were logged (0 when the table has no parent run in this store yet)."""
    run_id = results.meta.get("parent_run_id")
    paths = [Path(p) for p in paths if Path(p).exists()]
    if not run_id or not paths:
        return 0
    import mlflow

    from fedlab.config import load_config
    from fedlab.tracking import setup_mlflow

    t = load_config(None, []).tracking
    setup_mlflow(t.uri, t.artifact_root, t.experiment)
    client = mlflow.MlflowClient()
    try:
        client.get_run(run_id)
    except mlflow.exceptions.MlflowException:      # the parent lives in another MLflow store
        return 0
    for p in paths:
        client.log_artifact(run_id, str(p), folder)
    return len(paths)


def stale_reason(record: dict, cfg) -> str | None:
    """Why a record is not current for `cfg` on this machine (None when it is): another config made it
    (`outdated`), other numerics (`stale_numerics`) or other zoo weights (`stale_models`). A table re-runs such
    a record, marks it † until then, and `--merge-from` does not take it."""
    if outdated(record, cfg):
        return "made by another config than the row resolves to now"
    if stale_numerics(record):
        return "made with other numerics (another CPU kind, numerics mode or library versions)"
    if stale_models(record):
        return "made with other zoo weights than a run here would load"
    return None


def outdated(record: dict, cfg) -> bool:
    """A record another config made: its run key differs from `cfg`'s, or a method field they share differs."""
    from fedlab.runtime.federation import run_key

    return record.get("config_hash") != run_key(cfg) or bool(method_drift(record, cfg))


def method_drift(record: dict, cfg) -> list[str]:
    """The method-config fields whose resolved value in `record` differs from what `cfg` resolves to now. The run
    key hashes only non-default fields (a new field with a behaviour-keeping default leaves records current), so
    a changed *default* leaves the key as it was: the record's resolved config tells. Fields the record lacks
    (added since) are not compared."""
    canonical = lambda d: json.loads(json.dumps(d, default=str))      # tuples → lists, as results.json holds them
    then = canonical(record.get("method_config") or {})
    now = canonical(dataclasses.asdict(cfg.method))
    return sorted(k for k in then.keys() & now.keys() if then[k] != now[k])


def stale_numerics(record: dict) -> bool:
    """A record computed by other kernels than this process would use: its numerics fingerprint (instruction
    set in force, numerics mode, torch / transformers / tokenizers versions) differs from this process's, or
    it has none (made before fedlab recorded it)."""
    from fedlab import numerics

    then = (record.get("environment") or {}).get("numerics_fingerprint")
    return then != numerics.current_fingerprint()


def stale_models(record: dict) -> list[str]:
    """The zoo models a record was made with whose weights differ from the ones a run here would load (the
    shipped weights when they match the current recipe, else the ones built here): its numbers came from other
    weights, so it is stale. That covers a recipe that changed (a ZOO_VERSION bump that builds the same weights
    keeps the record) and the same recipe built on another machine kind before the zoo was shipped (tiny-llama's
    recipe 850b55dd built bcff7e16… on the Intel machines and b125cf01… on the AMD ones). A model neither
    shipped nor built is built first (the run would need it anyway)."""
    from fedlab.models.zoo import ZOO, build, is_built, read_meta

    out = []
    for name, d in (record.get("models") or {}).items():
        if name not in ZOO or not d.get("weights_sha256"):
            continue
        if not is_built(name):
            build(name)
        if read_meta(name).get("weights_sha256") != d["weights_sha256"]:
            out.append(name)
    return out


def execute(plan: list[Planned], results: Results, seeds: list[int], extra: tuple[str, ...] = (),
            rerun: bool = False, title: str = "", summarize: Callable | None = None,
            progress: bool = True, jobs: int | None = None, allow_dirty: bool = False) -> int:
    """Run every (row, seed) the results do not hold for the current config, weights and numerics, `jobs` at a
    time (default: as many as the cores allow for the runs' threads), saving each record as its run ends;
    returns how many ran. A dirty tree is refused (`DirtyTree`) unless `allow_dirty` (`check_tree`)."""
    from fedlab.parallel import default_jobs, run_many

    todo = []
    for p in plan:
        for seed in seeds:
            cfg = p.resolve(seed, extra)
            old = results.records.get(record_key(p.key, seed))
            if rerun or old is None or stale_reason(old, cfg) is not None:
                todo.append((p, seed, cfg))
    if not todo:
        return 0
    check_tree(allow_dirty)
    jobs = default_jobs([c for *_, c in todo]) if jobs is None else jobs
    parent = _parent_run(results, todo[0][2], title or str(results.path.parent.name))
    tags = {"mlflow.parentRunId": parent, "fedlab.table": title} if parent else None
    if progress:
        print(f"[fedlab] table: {len(todo)} runs to make, {jobs} at a time", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    failed = []
    for done, (i, h) in enumerate(run_many([c for *_, c in todo], [tags] * len(todo), jobs), 1):
        p, seed, cfg = todo[i]
        if isinstance(h, BaseException):
            failed.append(f"{p.key} seed {seed}: {type(h).__name__}: {h}")
            print(f"[fedlab] table run {done}/{len(todo)}: {p.key} seed {seed} FAILED ({type(h).__name__}: {h}); "
                  "the other runs go on", file=sys.stderr, flush=True)
            continue
        seconds = h.final.get("time/total", float("nan"))
        rec = make_record(p, seed, cfg, h, seconds, extra, summarize(cfg, h) if summarize else None)
        keep_diff(results.path.parent, rec, h.diff)
        results.records[record_key(p.key, seed)] = rec
        results.save()
        if h.diff and not allow_dirty and progress:
            print(f"[fedlab] table: {p.key} seed {seed} ran after the tree changed; its diff is kept in {rec['diff']}",
                  file=sys.stderr, flush=True)
        if progress:
            left = (time.perf_counter() - t0) / done * (len(todo) - done)
            score = h.final.get(h.headline)
            print(f"[fedlab] table run {done}/{len(todo)}: {p.key} seed {seed}: {h.headline} "
                  f"{score if score is None else round(score, 4)} ({seconds:.0f}s)"
                  + (f", about {left / 60:.0f} min left" if done < len(todo) else ""), file=sys.stderr, flush=True)
    if failed:
        raise RuntimeError(f"{len(failed)} of {len(todo)} table runs failed (the others are recorded): "
                           + "; ".join(failed))
    return len(todo)


def table_parser(title: str = "", default_seeds: tuple[int, ...] = (0, 1, 2)) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=title or None)
    ap.add_argument("overrides", nargs="*", help="key=value applied to every run")
    ap.add_argument("--seeds", default=",".join(map(str, default_seeds)), help="comma-separated run seeds")
    ap.add_argument("--only", default=None, help="run only rows whose key starts with this, or is exactly this when it ends with $ "
                         "(several: comma-separated)")
    ap.add_argument("--rerun", action="store_true", help="run again rows that results.json already holds")
    ap.add_argument("--render-only", action="store_true", help="write RESULTS.md from results.json, run nothing")
    ap.add_argument("--jobs", type=int, default=None, help="runs at once (default: as many as the cores allow; "
                                                         "1 = one after another)")
    ap.add_argument("--allow-dirty", action="store_true", help="run from a tree with uncommitted changes: each "
                    "record keeps the diff (its sha256, and the patch in diffs/)")
    ap.add_argument("--merge-from", action="append", default=[], metavar="PATH",
                    help="first take the records another clone or machine made of this table (its results.json, "
                    "or its table folder) that this table would not run again and can trace: rows of the plan "
                    "(and of --only; every seed), from a clean tree at a commit this checkout holds, current for "
                    "today's config, numerics and weights; a record held here too is kept and compared, and a "
                    "difference exits 1 (repeatable)")
    return ap


def only_prefixes(only: str | None) -> tuple[str, ...]:
    """The row-key patterns of `--only`: prefixes, or whole keys ending with `$` (comma-separated, spaces
    stripped; empty when None)."""
    return tuple(x.strip() for x in (only or "").split(",") if x.strip())


def _matches(key: str, pattern: str) -> bool:
    """A `--only` pattern: a key prefix, or the whole key when it ends with `$` (`t/fedavg$` is not `t/fedavg_x`)."""
    return key == pattern[:-1] if pattern.endswith("$") else key.startswith(pattern)


def select_rows(plan: list[Planned], only: str | None) -> list[Planned]:
    """The rows whose key matches one of the comma-separated patterns of `only` (all rows when None): a prefix,
    or an exact key ending with `$`."""
    patterns = only_prefixes(only)
    unmatched = [x for x in patterns if not any(_matches(p.key, x) for p in plan)]
    if unmatched:
        print(f"[fedlab] table: --only {', '.join(unmatched)} matches no row", file=sys.stderr, flush=True)
    return [p for p in plan if not patterns or any(_matches(p.key, x) for x in patterns)]


def run_table(folder: Path, plan: Callable[..., list[Planned]], render: Callable[[Results], str],
              argv: list[str] | None = None, title: str = "", default_seeds: tuple[int, ...] = (0, 1, 2),
              summarize: Callable | None = None, after: Callable[[Results], None] | None = None) -> int:
    """The command line of a table script (see the module docstring)."""
    parser = table_parser(title, default_seeds)
    args = parser.parse_args(argv)
    if args.only is not None and not [x for x in only_prefixes(args.only) if x != "$"]:
        parser.error(f"--only {args.only!r} names no row pattern (e.g. --only homo/,hetero/ or --only 'homo/fedavg$')")
    from fedlab.config import ConfigError
    from fedlab.interrupt import Interrupted

    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    rows = select_rows(plan(), args.only)
    try:
        results = Results(Path(folder) / "results.json")
        reports = merge_all(results, args.merge_from, rows, tuple(args.overrides), args.allow_dirty)
        for line in (line for rep in reports for line in rep.lines()):
            print(line, file=sys.stderr, flush=True)
        if not args.render_only:
            execute(rows, results, seeds, tuple(args.overrides), args.rerun, title, summarize, jobs=args.jobs,
                    allow_dirty=args.allow_dirty)
    except (ConfigError, DirtyTree, MergeError) as e:
        print(f"fedlab: error: {e}", file=sys.stderr)
        return 2
    except Interrupted as e:
        print(f"fedlab: table interrupted ({e}); finished runs are recorded in {results.path} — run the same "
              "command again to make the rest", file=sys.stderr)
        return e.exit_code
    text = render(results)
    (Path(folder) / "RESULTS.md").write_text(text)
    if after is not None:
        after(results)
    print(text)
    differ = [k for rep in reports for k in rep.differ]
    if differ:
        print(f"fedlab: {len(differ)} record(s) held here and in --merge-from disagree (above): the table is rendered "
              "from this file's records", file=sys.stderr)
        return 1
    return 0


# ── Records made elsewhere, merged in (`--merge-from`) ────────────────────────────────────────
# A table's records made elsewhere — another clone, worktree or machine — merged into this one's results.json
# (`make_tables.py --merge-from OTHER`), so a table can be run in parts on several machines and rendered as one.
#
# An incoming record joins only when it is one this table would not run again and can trace: its row is in the
# table's plan (and in `--only`; every seed it holds, not only `--seeds`), it was made from a committed tree at a
# commit this checkout holds (`--allow-dirty` also takes a dirty tree's record, with its patch, checked against
# the record's sha256, and one made outside git), and it is current (`stale_reason`: the config the row
# resolves to now, this machine's numerics, the zoo weights a run here would load). Where both files hold a
# current record of the same (row, seed) from two runs, this file's stays and the two are compared — final,
# zero-shot and per-round numbers: with pinned numerics they are equal, so a difference is a reproducibility
# failure, and the table script exits 1 after rendering.

COMPARED = ("final", "zero", "rounds")       # the numbers of a record that two runs of one config must share
NOT_A_ROW = "no row of this table by that key (or outside --only)"


class MergeError(ValueError):
    """A `--merge-from` source that is not another table's records (one line for the user)."""


@dataclass
class MergeReport:
    """What a merge did, by record key (`row@seedN`)."""
    source: Path
    added: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)      # this file's record was stale, the incoming one current
    same: list[str] = field(default_factory=list)          # the same run (run id) is already here
    agree: list[str] = field(default_factory=list)         # both current, two runs, the same numbers
    differ: dict[str, list[str]] = field(default_factory=dict)   # both current: what differs between them
    skipped: dict[str, list[str]] = field(default_factory=dict)  # reason → keys

    def skip(self, reason: str, key: str) -> None:
        self.skipped.setdefault(reason, []).append(key)

    def lines(self) -> list[str]:
        """The report as the table script prints it (one line, then one per disagreement and skip reason)."""
        out = [f"[fedlab] merge from {self.source}: {len(self.added)} added, {len(self.replaced)} replaced a stale "
               f"record, {len(self.same)} already here, {len(self.agree)} held here too with the same numbers, "
               f"{len(self.differ)} held here with OTHER numbers, {sum(map(len, self.skipped.values()))} skipped"]
        for key, what in self.differ.items():
            out.append(f"[fedlab]   REPRODUCIBILITY FAILURE {key}: the same config and numerics gave other numbers "
                       f"({', '.join(what[:4])}{', …' if len(what) > 4 else ''}); this file's record is kept")
        for reason, keys in self.skipped.items():
            shown = ", ".join(keys[:3]) + (f", … ({len(keys)} in all)" if len(keys) > 3 else "")
            out.append(f"[fedlab]   skipped, {reason}: {shown}")
        if self.added or self.replaced:
            out.append("[fedlab]   the merged records name their MLflow runs in the other machine's store (`run_id`)")
        return out


def results_path(source: str | Path, own: Path) -> Path:
    """The results.json a `--merge-from` argument names (the file, or a table folder holding one); a missing
    one, or this table's own file, is a MergeError."""
    p = Path(source)
    p = p / "results.json" if p.is_dir() else p
    if not p.is_file():
        raise MergeError(f"--merge-from {source}: no such file (give another clone's results.json, or its table "
                         "folder)")
    if own.exists() and p.samefile(own):
        raise MergeError(f"--merge-from {source}: that is this table's own results.json")
    return p


def _read(path: Path) -> Results:
    from fedlab.files import FileProblem

    try:
        return Results(path)
    except FileProblem as e:
        raise MergeError(f"--merge-from {path}: not a table's records ({str(e).split(': ', 1)[-1].split(';')[0]}); "
                         "copy it again from the machine that made it") from None


def _commit_known(commit: str, cache: dict[str, bool]) -> bool:
    """Whether this checkout's git holds `commit` (a hex object name: a record from a commit it lacks cannot be
    traced here)."""
    if not re.fullmatch(r"[0-9a-f]{7,40}", commit):
        return False
    if commit not in cache:
        try:
            r = subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{commit}^{{commit}}"],
                               capture_output=True, timeout=30)
            cache[commit] = r.returncode == 0
        except (OSError, subprocess.SubprocessError):
            cache[commit] = False
    return cache[commit]


def differing(a: dict, b: dict) -> list[str]:
    """What two records of one (row, seed) do not share: final metrics that differ or that only one holds, and
    `zero` / `rounds` as a whole (NaN equals NaN: both are compared as written to JSON)."""
    dump = lambda x: json.dumps(x, sort_keys=True)
    fa, fb = a.get("final") or {}, b.get("final") or {}
    out = [f"final {k}" for k in sorted(fa.keys() | fb.keys()) if k not in fa or k not in fb or dump(fa[k]) != dump(fb[k])]
    return out + [k for k in COMPARED[1:] if dump(a.get(k)) != dump(b.get(k))]


def _patch_problem(rec: dict, src_folder: Path) -> str | None:
    """Why a dirty record's patch cannot come along (None when it can, or when the record names none)."""
    if not rec.get("diff"):
        return None
    src = (src_folder / rec["diff"]).resolve()
    if not src.is_relative_to(src_folder.resolve()) or not src.is_file():
        return "its patch (diffs/) is missing beside the other results.json"
    from fedlab.provenance import diff_sha256

    if diff_sha256(src.read_text()) != (rec.get("environment") or {}).get("diff_sha256"):
        return "its patch does not match the sha256 the record holds"
    return None


def _untraceable(rec: dict, allow_dirty: bool, known: dict[str, bool]) -> str | None:
    """Why a record's source cannot be traced here (None when it can)."""
    git = rec.get("git")
    if not git:
        return None if allow_dirty else "made outside a git checkout (--allow-dirty takes it)"
    if str(git).endswith("+dirty") and not allow_dirty:
        return "made from uncommitted changes (--allow-dirty takes it, with its patch)"
    if not _commit_known(str(git).removesuffix("+dirty"), known):
        return "made at a commit this checkout does not hold (git fetch it first)"
    return None


def merge_records(results: Results, source: str | Path, plan: list[Planned], extra: tuple[str, ...] = (),
                  allow_dirty: bool = False) -> MergeReport:
    """Add to `results` the records of `source` (a results.json or its folder) that this table can take (the
    comment above `COMPARED`), then save; `extra` are the trailing overrides the rows run with."""
    path = results_path(source, results.path)
    incoming = _read(path)
    rows = {p.key: p for p in plan}
    report, known = MergeReport(path), {}
    for k, rec in incoming.records.items():
        if not isinstance(rec, dict) or not isinstance(rec.get("key"), str) or not isinstance(rec.get("seed"), int):
            report.skip("not a table record (no key and seed)", k)
            continue
        row = rows.get(rec["key"])
        if row is None:
            report.skip(NOT_A_ROW, k)
            continue
        if k != record_key(row.key, rec["seed"]):
            report.skip("its name and its key and seed fields disagree", k)
            continue
        cfg = row.resolve(rec["seed"], extra)
        reason = _untraceable(rec, allow_dirty, known) or stale_reason(rec, cfg) or _patch_problem(rec, path.parent)
        if reason:
            report.skip(reason, k)
            continue
        mine = results.records.get(k)
        if mine is not None and mine.get("run_id") == rec.get("run_id"):
            report.same.append(k)
            continue
        if mine is not None and stale_reason(mine, cfg) is None:
            what = differing(mine, rec)
            if what:
                report.differ[k] = what
            else:
                report.agree.append(k)
            continue
        if rec.get("diff"):            # a dirty tree's patch, kept beside the records it made
            dst = results.path.parent / rec["diff"]
            if not dst.exists():
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path.parent / rec["diff"], dst)
        (report.added if mine is None else report.replaced).append(k)
        results.records[k] = rec
    if report.added or report.replaced:
        results.save()
    return report


def merge_all(results: Results, sources: list[str], plan: list[Planned], extra: tuple[str, ...] = (),
              allow_dirty: bool = False) -> list[MergeReport]:
    """`merge_records` from each source in turn, after checking that every source exists (a typo in the last
    one merges nothing)."""
    for s in sources:
        results_path(s, results.path)
    return [merge_records(results, s, plan, extra, allow_dirty) for s in sources]
