"""The experiment runner behind every table script: a plan of runs, each run once per seed, one record per
run in a resumable `results.json`, and tables rendered from the records alone.

A table script is its plan and its rendering:

    def plan() -> list[Planned]: ...                 # which configs, with which overrides, under which key
    def render(results: Results) -> str: ...         # markdown from the records
    if __name__ == "__main__":
        sys.exit(run_table(HERE, plan, render, title="…"))

`python make_tables.py` runs what `results.json` does not hold yet (a run whose resolved config changed is
run again, and so is a seed beyond the script's default seeds that a row holds from another config), writes each
record as soon as its run ends (kill it at any moment; run it again to continue), then renders `RESULTS.md`.
`--seeds 0,1,2` (those seeds alone), `--only PREFIX` (or `KEY$`, one row exactly), `--rerun`,
`--render-only` and trailing `key=value` overrides for every run; `--merge-from OTHER/results.json` first
takes the records another clone or machine made of the table (`fedlab.evidence.merge`); `--mixed` lists the rows
whose seeds were made at several commits and how to bring each to one (`fedlab.evidence.unify`). Every run is logged to
MLflow under one parent run per table. The rows and their records (`Planned`, `Results`, what a record holds and
when it is stale) are `fedlab.evidence.records`; table scripts take `Planned` and `Results` from here.
"""
from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

from fedlab.evidence.merge import MergeError, merge_all
from fedlab.evidence.records import (
    OTHER_NUMERICS,
    Planned,
    Results,
    keep_diff,
    make_record,
    numerics_fingerprint,
    record_key,
    stale_reason,
)
from fedlab.evidence.spotcheck import SpotCheckError, spot_check
from fedlab.evidence.verdicts import CLAIM_SEEDS
from fedlab.validation import positive_int


class DirtyTree(RuntimeError):
    """A table run asked of a tree with uncommitted changes to files that can change its numbers."""


def check_tree(allow_dirty: bool, folder: Path | None = None) -> dict:
    """fedlab's git state before a table runs: a tree with uncommitted changes (or no git checkout) is refused
    unless `allow_dirty` — then every record carries the diff's sha256 and the diff itself is kept. A table
    `folder` inside another fedlab checkout than the imported one is refused always: its records would name the
    imported checkout's commit while its plan and YAMLs come from the other."""
    from fedlab.evidence import provenance

    other = provenance.foreign_checkout(folder) if folder is not None else None
    if other is not None:
        raise DirtyTree(f"table: {folder} lies in the fedlab checkout {other}, but this Python imports fedlab from "
                        f"{provenance.ROOT}, so its records would name {provenance.ROOT}'s commit while the plan and "
                        f"YAMLs come from {other}; run it with PYTHONPATH={other}, or `pip install -e {other}`")
    state = provenance.git_state()
    if state["clean"] is not True and not allow_dirty:
        what = ("fedlab is not a git checkout, so no record could name its source" if state["commit"] is None else
                f"the working tree has uncommitted changes to {len(state['changed'])} file(s) that can change "
                f"numbers ({', '.join(state['changed'][:4])}{', …' if len(state['changed']) > 4 else ''})")
        raise DirtyTree(f"table: {what}; commit them first, or pass --allow-dirty to record the diff with every "
                        "record (its sha256 in the record, the patch in diffs/ beside results.json and in MLflow)")
    return state


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


def _parent_run(results: Results, cfg, title: str) -> str | None:
    """One MLflow parent run per table (continued when the script runs again): its runs compare side by side."""
    if not cfg.tracking.enabled:
        return None
    import mlflow

    from fedlab.tracking import setup_mlflow

    setup_mlflow(cfg.tracking.uri, cfg.tracking.artifact_root, cfg.tracking.experiment)
    run_id = _store_parent(mlflow.MlflowClient(), results, cfg.tracking.experiment, title)
    if results.meta.get("parent_run_id") != run_id:
        results.meta["parent_run_id"] = run_id
        results.save()
    return run_id


def _store_parent(client, results: Results, experiment: str, title: str | None) -> str | None:
    """The table's parent run in this MLflow store: the one results.json names when the store holds it; else,
    given `title`, the store's own parent of that table (tag `fedlab.table`), created when it has none — without
    writing its id into results.json, so that rendering on another clone leaves the records as they are."""
    import mlflow

    known = results.meta.get("parent_run_id")
    if known:
        try:
            client.get_run(known)
            return known
        except mlflow.exceptions.MlflowException:      # the parent lives in another MLflow store
            pass
    if title is None:
        return None
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        exp_id = client.create_experiment(experiment)
    else:
        exp_id = exp.experiment_id
        found = client.search_runs([exp_id], f"tags.`fedlab.table` = '{title}' and tags.`fedlab.table_parent` = '1'",
                                   max_results=1)
        if found:
            return found[0].info.run_id
    run = client.create_run(exp_id, run_name=f"table: {title}", tags={"fedlab.table": title,
                                                                        "fedlab.table_parent": "1"})
    client.set_terminated(run.info.run_id)
    return run.info.run_id


def log_to_parent(results: Results, paths: list[Path], folder: str = "figures", title: str | None = None) -> int:
    """Figures drawn across a table's runs (means over seeds, the forest plot) logged to the table's MLflow parent
    run, beside its runs; returns how many were logged. Without `title`, 0 when the table has no parent run in
    this store yet; with it, the store's own parent of the table is found or made (`_store_parent`)."""
    paths = [Path(p) for p in paths if Path(p).exists()]
    if not paths or (not results.meta.get("parent_run_id") and title is None):
        return 0
    import mlflow

    from fedlab.config import load_config
    from fedlab.tracking import setup_mlflow

    t = load_config(None, []).tracking
    if not t.enabled:
        return 0
    setup_mlflow(t.uri, t.artifact_root, t.experiment)
    client = mlflow.MlflowClient()
    run_id = _store_parent(client, results, t.experiment, title)
    if run_id is None:
        return 0
    for p in paths:
        client.log_artifact(run_id, str(p), folder)
    return len(paths)


def _stale_beyond(results: Results, p: Planned, seeds: list[int], extra: tuple[str, ...]) -> list[int]:
    """The seeds outside `seeds` at which row `p` holds a record another config, code or zoo made than a run here
    would (`stale_reason`; records of other numerics aside, which only --replace-other-numerics replaces)."""
    out = []
    for rec in results.runs(p.key):
        seed = rec.get("seed")
        if isinstance(seed, int) and seed not in seeds:
            why = stale_reason(rec, p.resolve(seed, extra))
            if why is not None and why != OTHER_NUMERICS:
                out.append(seed)
    return out


def execute(plan: list[Planned], results: Results, seeds: list[int], extra: tuple[str, ...] = (),
            rerun: bool = False, title: str = "", summarize: Callable | None = None,
            progress: bool = True, jobs: int | None = None, allow_dirty: bool = False,
            replace_other_numerics: bool = False, held_stale: bool = False, seeds_given: bool = True) -> int:
    """Run every (row, seed) the results do not hold for the current config, weights and numerics, `jobs` at a
    time (default: as many as the cores allow for the runs' threads), saving each record as its run ends;
    returns how many ran. `held_stale`: a row's seeds beyond `seeds` whose records another config made are run
    again too (a script run without --seeds brings every seed its rows hold up to date: a budget page chooses
    nothing while a row holds such a record). A dirty tree is refused (`DirtyTree`) unless `allow_dirty`
    (`check_tree`). Runs that would replace records made with other numerics (a machine kind not measured,
    another numerics mode or other library versions: those of every measured kind are current) are refused unless
    `replace_other_numerics`: they are someone's numbers, which a run here does not reproduce.
    A row made at seeds of its own (`Planned.seeds`) runs at those instead of `seeds`, or, when `seeds_given`
    (the command named them), at those of `seeds` among them."""
    from fedlab import numerics
    from fedlab.config import ConfigError
    from fedlab.parallel import default_jobs, run_many

    todo, other_numerics, other_kind = [], 0, 0
    for p in plan:
        mine = p.run_seeds(seeds, seeds_given)
        if progress and p.seeds is not None and not mine:
            print(f"[fedlab] table: {p.key} is made at seeds {','.join(map(str, p.seeds))} only, none of which "
                  "--seeds names", file=sys.stderr, flush=True)
        for seed in (mine if not held_stale else sorted({*mine, *_stale_beyond(results, p, mine, extra)})):
            cfg = p.resolve(seed, extra)
            old = results.records.get(record_key(p.key, seed))
            why = None if old is None else stale_reason(old, cfg)
            if rerun or old is None or why is not None:
                todo.append((p, seed, cfg))
                other_numerics += why == OTHER_NUMERICS
                other_kind += (old is not None and why is None
                               and numerics_fingerprint(old) != numerics.current_fingerprint())
    if not todo:
        return 0

    if numerics.judge_as() == "reference":
        raise ConfigError(f"{numerics.JUDGE_ENV}=reference judges records as the reference machine kind would, not "
                          f"as a run here would compute: it renders pages (--render-only, fedlab results) and runs "
                          f"nothing ({len(todo)} run(s) to make here); unset it to run them")
    if other_numerics and not replace_other_numerics:
        raise ConfigError(f"{other_numerics} of the {len(todo)} run(s) to make would replace records made with other "
                          "numerics than this machine's (a machine kind not measured, another numerics mode or "
                          "other library versions: `fedlab doctor`), with this machine's numbers; pass "
                          "--replace-other-numerics to replace "
                          "them, or --render-only to render the records as they are")
    check_tree(allow_dirty, results.path.parent)
    jobs = default_jobs([c for *_, c in todo]) if jobs is None else jobs
    parent = _parent_run(results, todo[0][2], title or str(results.path.parent.name))
    tags = {"mlflow.parentRunId": parent, "fedlab.table": title} if parent else None
    if progress:
        print(f"[fedlab] table: {len(todo)} runs to make, {jobs} at a time", file=sys.stderr, flush=True)
        if other_numerics:
            print(f"[fedlab] table: {other_numerics} of them replace records made with other numerics than this "
                  "machine's (--replace-other-numerics); the replacements hold this machine's numbers",
                  file=sys.stderr, flush=True)
        if other_kind:
            print(f"[fedlab] table: {other_kind} of them (--rerun) replace current records another machine kind "
                  "made; the replacements hold this machine's numbers", file=sys.stderr, flush=True)
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


# the seeds a main table script makes of every row unless told (a headline claim reads all of them)
TABLE_SEEDS = tuple(range(CLAIM_SEEDS))


def table_parser(title: str = "", default_seeds: tuple[int, ...] = (0, 1, 2)) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=title or None)
    ap.add_argument("overrides", nargs="*", help="key=value applied to every run")
    ap.add_argument("--seeds", default=None, help="comma-separated run seeds (default: "
                    f"{','.join(map(str, default_seeds))}, and every further seed a row holds whose record another "
                    "config made; a row made at seeds of its own runs at those, or at those of --seeds among "
                    "them)")
    ap.add_argument("--only", default=None, help="run only rows whose key starts with this, or is exactly this when it ends with $ "
                         "(several: comma-separated)")
    ap.add_argument("--rerun", action="store_true", help="run again rows that results.json already holds")
    ap.add_argument("--render-only", action="store_true", help="write RESULTS.md from results.json, run nothing")
    ap.add_argument("--jobs", type=positive_int, default=None, help="runs at once (default: as many as the cores allow; "
                                                         "1 = one after another)")
    ap.add_argument("--allow-dirty", action="store_true", help="run from a tree with uncommitted changes: each "
                    "record keeps the diff (its sha256, and the patch in diffs/)")
    ap.add_argument("--replace-other-numerics", action="store_true",
                    help="re-run rows whose records were made with other numerics (a machine kind not measured, "
                         "another numerics mode or other library versions: `fedlab doctor`), replacing them with "
                         "this machine's numbers")
    ap.add_argument("--merge-from", action="append", default=[], metavar="PATH",
                    help="first take the records another clone or machine made of this table (its results.json, "
                    "or its table folder) that this table would not run again and can trace: rows of the plan "
                    "(and of --only; every seed), from a clean tree at a commit this checkout holds, current for "
                    "today's config, numerics and weights; a record held here too is kept and compared, and a "
                    "difference exits 1 (repeatable)")
    ap.add_argument("--spot-check", type=positive_int, default=None, metavar="K",
                    help="re-run K recorded (row, seed) pairs drawn at random at HEAD (a clean tree) and compare "
                    "every final metric with the record; a difference is a reproducibility failure (exit 1); the "
                    "outcome goes into results.json and the page's header")
    ap.add_argument("--kind-check", type=positive_int, default=None, metavar="K",
                    help="re-run here K current records another measured machine kind made, drawn at random, and "
                    "report each final metric's gap in units of its row's between-seed SD (a measurement, not a "
                    "failure); the outcome goes into results.json and the page's header")
    ap.add_argument("--spot-seed", type=int, default=None, help="the draw's seed for --spot-check and --kind-check "
                    "(default: random, "
                    "printed)")
    ap.add_argument("--spot-max-seconds", type=float, default=None, metavar="S",
                    help="--spot-check and --kind-check draw only among records whose run took at most S seconds")
    ap.add_argument("--mixed", action="store_true", help="list the rows (of --only) whose seeds were made at several "
                    "commits, with the commands that re-make the seeds made elsewhere at the commit of the rest and "
                    "merge them back; run and write nothing")
    return ap


def script_name(folder: Path) -> str:
    """The table script as a researcher types it from the repository root: the running script where it stands
    in the table's folder or the one above it (experiments/fedmkt/budget.py writes experiments/fedmkt/budget/),
    else `<folder>/make_tables.py`."""
    from fedlab.files import canonical

    folder = Path(folder).resolve()
    running = Path(sys.argv[0]).resolve()
    return canonical(running if running.suffix == ".py" and running.parent in (folder, folder.parent)
                     else folder / "make_tables.py")


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
    from fedlab.validation import seed_list

    try:
        seeds = seed_list(args.seeds) if args.seeds is not None else list(default_seeds)
    except ConfigError as e:
        parser.error(str(e))
    rows = select_rows(plan(), args.only)
    spot = None
    try:
        from fedlab import numerics

        numerics.current_fingerprint()   # a bad FEDLAB_JUDGE_NUMERICS is one line, before the render reads it
        results = Results(Path(folder) / "results.json")
        if args.mixed:
            from fedlab.evidence.unify import report
            from fedlab.files import canonical

            by_key = {p.key: p for p in rows}
            current = lambda rec: stale_reason(rec, by_key[rec["key"]].resolve(rec["seed"], tuple(args.overrides))) is None
            print("\n".join(report(results.records, list(by_key), script_name(folder), canonical(Path(folder)),
                                    [p.key for p in plan()], current)))
            return 0
        reports = merge_all(results, args.merge_from, rows, tuple(args.overrides), args.allow_dirty)
        for line in (line for rep in reports for line in rep.lines()):
            print(line, file=sys.stderr, flush=True)
        if args.spot_check is not None or args.kind_check is not None:
            from fedlab.evidence.kindcheck import kind_check

            check_tree(False, results.path.parent)           # the outcome names HEAD: a clean tree only
            check, k, tag = ((spot_check, args.spot_check, "fedlab.spot_check") if args.spot_check is not None
                             else (kind_check, args.kind_check, "fedlab.kind_check"))
            parent = lambda cfg: _parent_run(results, cfg, title or Path(folder).name)
            outcome = check(results, rows, k, args.spot_seed, args.spot_max_seconds, jobs=args.jobs or 1,
                            tags_for=lambda cfg: ({"mlflow.parentRunId": p, "fedlab.table": title, tag: "1"}
                                                  if (p := parent(cfg)) else None))
            spot = outcome if check is spot_check else None
        elif not args.render_only:
            execute(rows, results, seeds, tuple(args.overrides), args.rerun, title, summarize, jobs=args.jobs,
                    allow_dirty=args.allow_dirty, replace_other_numerics=args.replace_other_numerics,
                    held_stale=args.seeds is None, seeds_given=args.seeds is not None)
    except (ConfigError, DirtyTree, MergeError, SpotCheckError) as e:
        print(f"fedlab: error: {e}", file=sys.stderr)
        return 2
    except Interrupted as e:
        print(f"fedlab: table interrupted ({e}); finished runs are recorded in {results.path} — run the same "
              "command again to make the rest", file=sys.stderr)
        return e.exit_code
    text = render(results)
    Path(folder).mkdir(parents=True, exist_ok=True)       # a new table's folder, when nothing was run into it
    (Path(folder) / "RESULTS.md").write_text(text)
    if after is not None:
        after(results)
    print(text)
    log_figures(results, Path(folder), title or Path(folder).name)
    differ = [k for rep in reports for k in rep.differ]
    if differ:
        print(f"fedlab: {len(differ)} record(s) held here and in --merge-from disagree (above): the table is rendered "
              "from this file's records", file=sys.stderr)
        return 1
    if spot is not None and spot["failures"]:
        print(f"fedlab: spot-check: {spot['failures']} of {len(spot['pairs'])} re-run pairs differ from their records "
              "(above): a reproducibility failure", file=sys.stderr)
        return 1
    return 0


def log_figures(results: Results, folder: Path, title: str) -> None:
    """Every figure beside the table's RESULTS.md (its forest plot among them) logged to the table's parent run in
    this MLflow store (`log_to_parent`); a store that cannot be written is one line, not a failure of the render."""
    figures = sorted(folder.glob("*.png"))
    try:
        n = log_to_parent(results, figures, title=title)
    except Exception as e:            # the store is the user's: the render stands without it
        print(f"[fedlab] table: the figures were not logged to MLflow ({type(e).__name__}: {e})", file=sys.stderr)
        return
    if n:
        print(f"[fedlab] table: {n} figure(s) logged to the table's MLflow parent run", file=sys.stderr)

