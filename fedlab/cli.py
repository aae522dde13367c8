"""`fedlab run | sweep | zoo | data | config | report | ui` — the command line."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from fedlab.config import ConfigError
from fedlab.evidence.tables import final_table, format_table
from fedlab.models.shipped import ZooError
from fedlab.validation import positive_int, seed_list


def _fail(msg: str, code: int = 2) -> int:
    print(f"fedlab: error: {msg}", file=sys.stderr)
    return code


def cmd_run(args) -> int:
    from fedlab.config import load_config

    # config errors and preflight errors (raised by run_experiment before anything is written) reach
    # main(), which prints them as one line
    cfg = load_config(args.config, args.overrides)
    from fedlab import numerics

    if cfg.numerics != numerics.mode():
        return _restart(args.argv, {numerics.ENV: cfg.numerics})
    from fedlab import interrupt

    try:
        with interrupt.handlers():
            return _run(args, cfg)
    except interrupt.Interrupted as e:
        return _interrupted(e, args, cfg)


def _interrupted(e, args, cfg) -> int:
    """One line for a run stopped by a signal: after which round, where the checkpoint is, how to resume."""
    import shlex
    import signal

    from fedlab.runtime.federation import run_dir

    again = ["fedlab", "run", *[a for a in args.argv[1:] if not a.startswith("resume=")], "resume=true"]
    name = signal.Signals(e.signum).name
    if args.seeds:
        said = f"interrupted ({name}); the seeds that finished are recorded, the others stopped at a round's end"
    elif e.after_round is not None:
        said = (f"interrupted ({name}) after round {e.after_round} of {cfg.federation.rounds}; its checkpoint is "
                f"in {run_dir(cfg)}")
    else:
        said = f"interrupted ({name}) {e.where or 'before round 1 completed'}; no round was checkpointed"
    print(f"fedlab: {said}; resume with: {shlex.join(again)}", file=sys.stderr)
    return e.exit_code


def _run(args, cfg) -> int:
    from fedlab.experiment import run_experiment

    if args.seeds:
        from fedlab.seeds import run_seeds

        seeds = seed_list(args.seeds)
        histories, parent = run_seeds(cfg, seeds, progress=True, jobs=args.jobs)
        print(final_table(histories))
        print(f"\n{len(seeds)} seeds ({args.seeds}); mean ± half-width of the 95 % t-interval · MLflow parent run "
              f"{parent or '(tracking off)'}")
        return 0
    history = run_experiment(cfg, progress=True)
    print(final_table(history))
    from fedlab.runtime.federation import format_time_split

    split = format_time_split(history.final)
    if split:
        print(split)
    total = history.final.get("time/total", 0.0)
    print(f"\nrun {history.run_id or '(tracking off)'} · outputs in {history.out_dir} · {total:.1f}s")
    if history.run_id:
        from fedlab.tracking import runs_view

        print(f"charts: `fedlab ui`, then {runs_view(history.experiment_id, history.run_id)}")
    return 0


def _restart(argv: list[str], env: dict) -> int:
    """This command again in a new Python process with `env` set (the CPU numerics are fixed before torch
    loads, so a config that asks for another mode runs in a process started in it)."""
    import os
    import subprocess

    print(f"[fedlab] starting again with {' '.join(f'{k}={v}' for k, v in env.items())}", file=sys.stderr, flush=True)
    try:
        return subprocess.call([sys.executable, "-m", "fedlab.cli", *argv], env={**os.environ, **env})
    except KeyboardInterrupt:
        return 130


def cmd_ui(args) -> int:
    """The MLflow UI on fedlab's store, with the address of the runs table printed first."""
    import subprocess

    from fedlab.tracking import runs_view, setup_mlflow

    exp_id = setup_mlflow(args.uri, args.artifact_root, args.experiment)
    print(f"runs of {args.experiment!r}: {runs_view(exp_id, host=f'http://{args.host}:{args.port}')}", flush=True)
    cmd = [sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", args.uri, "--host", args.host,
           "--port", str(args.port)]
    try:
        return subprocess.call(cmd)
    except KeyboardInterrupt:
        return 0


def cmd_zoo(args) -> int:
    from fedlab.models import shipped, zoo

    if args.action == "list":
        rows = [[r["name"], r["family"], r["role"], r["tokenizer"], r["built"], r["params"], r["seconds"],
                 r["fingerprint"], r["weights"], r["about"]] for r in zoo.describe_zoo()]
        print(format_table(rows, ["name", "family", "role", "tokenizer", "built", "params", "build s", "recipe",
                                  "weights sha256", "about"]))
        print("\nbuilt: shipped = the repository's weights (built by the current recipe); yes = built on this "
              "machine; stale = cached by another recipe (rebuilt on next use); recipe = fingerprint of what builds "
              "the model; weights sha256 = of the weights a run loads")
        return 0
    names = args.names or (list(zoo.ZOO) if args.action in ("verify", "ship") else zoo.TINY_ZOO)
    for n in names:
        if n not in zoo.ZOO:
            return _fail(f"zoo: {n!r} is not a zoo model; allowed: {', '.join(zoo.ZOO)}")
    if args.action == "verify":
        return _zoo_verify(names)
    if args.action == "ship":
        for n in names:
            meta = zoo.cache_meta(n)
            if not zoo.is_cached(n):
                return _fail(f"zoo ship: {n} is not built on this machine by the current recipe; run "
                             f"`fedlab zoo build {n} --rebuild` first")
            shipped.ship(n, zoo.zoo_dir(n), meta)
            print(f"{n}: shipped {meta['weights_sha256'][:12]} (recipe {meta['fingerprint']})")
        return 0
    from tqdm.auto import tqdm

    rebuild = args.rebuild or args.force
    for n in tqdm(names, desc="zoo", disable=None):
        path = zoo.build(n, force=rebuild)
        if rebuild:
            print(f"{n}: {path}\n  {_compare_with_shipped(n, zoo.cache_meta(n))}")
        else:
            print(f"{n}: {path}")
    return 0


def _compare_with_shipped(name: str, meta: dict) -> str:
    """One line: whether the weights built here equal the shipped ones."""
    from fedlab.models import shipped

    e = shipped.entry(name)
    got = meta.get("weights_sha256", "")
    if e is None:
        return f"weights {got[:12]}; {name} is not shipped"
    if e["fingerprint"] != meta.get("fingerprint"):
        return (f"weights {got[:12]}; the shipped ones ({e['weights_sha256'][:12]}) were built by another recipe "
                f"({e['fingerprint']}, now {meta.get('fingerprint')}): ship these with `fedlab zoo ship {name}`")
    if got == e["weights_sha256"]:
        return f"weights {got[:12]}: EQUAL to the shipped ones (this machine builds the reference weights)"
    tok = lambda files: (files or {}).get("tokenizer.json", {}).get("sha256")  # noqa: E731
    if tok(meta.get("files")) and tok(e.get("files")) and tok(meta.get("files")) != tok(e.get("files")):
        return (f"weights {got[:12]}: DIFFER from the shipped {e['weights_sha256'][:12]} (same recipe, but the "
                "tokenizer trained here is not the shipped one: the Hugging Face tokenizers trainer gave part of its "
                "vocabulary other ids in this process — WordPiece's '##' alphabet takes a per-process order — so the "
                "weights differ on any machine). Runs keep loading the shipped tokenizer and weights")
    return (f"weights {got[:12]}: DIFFER from the shipped {e['weights_sha256'][:12]} (same recipe; this machine "
            "computes otherwise: see `fedlab doctor`). Runs keep loading the shipped weights")


def _zoo_verify(names: list[str]) -> int:
    """Each shipped model's files against the manifest, and its recipe against today's: a line each."""
    from fedlab.models import shipped, zoo

    bad = 0
    for n in names:
        e = shipped.entry(n)
        if e is None:
            print(f"{n}: not shipped (built from its recipe on first use)")
            continue
        problems = shipped.problems(n)
        if problems:
            bad += 1
            print(f"{n}: DAMAGED: {'; '.join(problems)}; restore with `git checkout -- {shipped.SHIPPED / n}`")
        elif e["fingerprint"] != zoo.fingerprint(n):
            bad += 1
            print(f"{n}: STALE: shipped for recipe {e['fingerprint']}, the recipe is now {zoo.fingerprint(n)}; "
                  f"`fedlab zoo build {n} --rebuild && fedlab zoo ship {n}`")
        else:
            print(f"{n}: ok ({len(e['files'])} files, weights {e['weights_sha256'][:12]}, recipe {e['fingerprint']})")
    print(f"\n{len(names) - bad} of {len(names)} good" if bad else f"\nall {len(names)} good")
    return 1 if bad else 0


def cmd_doctor(args) -> int:
    """This machine's numerics against the reference digest (fedlab/numerics.py)."""
    from fedlab import idle_threads, numerics
    from fedlab.comm.sketch import native_status

    lines, same = numerics.report()
    print("\n".join(lines))
    print(f"OpenMP idle threads (fedlab/idle_threads.py): {idle_threads.decision}")
    print(f"count sketch native passes (ELSA from D = 512 on, fedlab/comm/count_sketch.c): {native_status()}")
    return 0 if same else 1


def cmd_data(args) -> int:
    from fedlab.config import load_config

    try:
        cfg = load_config(args.config, args.overrides)
    except ConfigError as e:
        return _fail(str(e))
    from fedlab.data.federated import build_federated_data
    from fedlab.data.tasks import TASKS

    if cfg.data.source == "embedded":
        from fedlab.data.tasks import task_examples

        rows = []
        for name, spec in TASKS.items():
            rows.append([name, spec.kind, cfg.data.train_per_task, cfg.data.test_per_task,
                         spec.n_choices or "-", (f"{spec.chance:.3f}" if spec.n_choices else "Rouge-L/EM"),
                         spec.about])
        print(format_table(rows, ["task", "kind", "train", "test", "choices", "chance", "about"]))
        ex = task_examples("two_hop", "test", 1)[0]
        print(f"\nexample (two_hop): {ex.prompt!r} choices={list(ex.choices)} answer={ex.target!r}")
    data = build_federated_data(cfg.data, cfg.seed)
    print(f"\npartition={cfg.data.partition} clients={data.num_clients} public={len(data.public)}")
    rows = [[cid, len(part), ", ".join(data.client_tasks(cid))] for cid, part in enumerate(data.train)]
    print(format_table(rows, ["client", "train", "tasks"]))
    return 0


def cmd_plan(args) -> int:
    """Parameters, traffic and training memory per role, built on the meta device (fedlab/plan)."""
    from fedlab.config import load_config

    try:
        cfg = load_config(args.config, args.overrides)
    except ConfigError as e:
        return _fail(str(e))
    from fedlab import plan as planning
    from fedlab.plan.memory import DTYPES

    if args.dtype not in DTYPES:
        return _fail(f"--dtype: {args.dtype!r} is not allowed; allowed: {', '.join(DTYPES)}")
    if args.device_gib <= 0:
        return _fail(f"--device-gib: {args.device_gib!r} is not allowed; expected a number of GiB > 0")
    try:
        plans = planning.plan(cfg, dtype=args.dtype, checkpointing=args.checkpointing, device_gib=args.device_gib)
    except ValueError as e:
        return _fail(str(e))
    print(planning.render(cfg, plans, dtype=args.dtype, checkpointing=args.checkpointing, device_gib=args.device_gib))
    if args.json:
        import json

        Path(args.json).write_text(json.dumps(planning.as_dicts(plans), indent=1))
    return 0


def cmd_config(args) -> int:
    """`fedlab config show CONFIG [KEY-PREFIX] [key=value ...]`: the resolved config, a line per leaf key with its
    value, default, source (the YAML of the `defaults:` chain that set it, the command line, or the default)
    and help (fedlab/config_help.py)."""
    from fedlab.config import load_config_with_sources
    from fedlab.config_help import show_lines

    prefixes = [a for a in args.overrides if "=" not in a]
    if len(prefixes) > 1:
        return _fail(f"config show: one KEY-PREFIX at most, got {', '.join(map(repr, prefixes))}")
    overrides = [a for a in args.overrides if "=" in a]
    try:
        cfg, sources = load_config_with_sources(args.config, overrides)
        lines = show_lines(cfg, sources, prefixes[0] if prefixes else "")
    except ConfigError as e:
        return _fail(str(e))
    except OSError as e:         # a folder or an unreadable file given as CONFIG
        return _fail(f"config: {args.config!r} cannot be read ({e.strerror or e})")
    print("\n".join(lines))
    return 0


# params that do not change what a run computes: runs that differ only in these (and the seed) are one row
_NOT_THE_EXPERIMENT = ("seed", "resume", "output_dir", "tracking.")


def group_by_seed(runs: list) -> list[list]:
    """Runs whose logged configs differ only in the seed (and where they were written), grouped, newest
    group first; parent runs (no config) are left out."""
    groups: dict = {}
    for r in runs:
        p = r.data.params
        if "method.name" not in p:
            continue
        key = tuple(sorted((k, v) for k, v in p.items() if not k.startswith(_NOT_THE_EXPERIMENT)))
        groups.setdefault(key, []).append(r)
    return list(groups.values())


def to_target(group) -> str:
    """The cost to eval.target of runs that differ only in the seed: how many reached it, and their mean rounds,
    MB (up + down) and seconds; "-" when none of them had a target."""
    metrics = [r.data.metrics for r in group if "cost/reached" in r.data.metrics]
    if not metrics:
        return "-"
    reached = [m for m in metrics if m["cost/reached"] >= 1]
    if not reached:
        return f"0/{len(metrics)} reached"
    mean = lambda k: sum(m[k] for m in reached) / len(reached)      # noqa: E731
    return (f"{len(reached)}/{len(metrics)} reached: {mean('cost/rounds_to_target'):.1f} rounds, "
            f"{mean('cost/bytes_to_target') / 1e6:.2f} MB, {mean('cost/seconds_to_target'):.0f} s")


def cmd_report(args) -> int:
    import mlflow

    from fedlab.evidence.stats import fmt_ci
    from fedlab.tracking import setup_mlflow

    setup_mlflow(args.uri, args.artifact_root, args.experiment)
    runs = mlflow.search_runs(experiment_names=[args.experiment], output_format="list",
                              order_by=["attributes.start_time DESC"], max_results=args.limit)
    if not runs:
        print(f"no runs in experiment {args.experiment!r} at {args.uri}")
        return 0
    client = mlflow.MlflowClient()
    rows = []
    for group in group_by_seed(runs):
        p = group[0].data.params
        zero = [x.value for r in group for x in client.get_metric_history(r.info.run_id, "acc/mean") if x.step == 0]
        final = [r.data.metrics["acc/mean"] for r in group if "acc/mean" in r.data.metrics]
        seeds = sorted(int(r.data.params.get("seed", 0)) for r in group)
        status = sorted({r.info.status for r in group})
        rows.append([group[0].info.run_name if len(group) == 1 else f"{len(group)} runs", p.get("method.name"),
                     p.get("model.name"), p.get("data.partition"), p.get("data.num_clients"),
                     p.get("federation.rounds"), ",".join(map(str, seeds)), fmt_ci(zero), fmt_ci(final),
                     to_target(group), "/".join(status)])
    costs = any(r[-2] != "-" for r in rows)
    heads = ["run", "method", "model", "partition", "clients", "rounds", "seeds", "zero-shot", "final acc",
             "to eval.target", "status"]
    print(format_table([r if costs else r[:-2] + r[-1:] for r in rows],
                       heads if costs else heads[:-2] + heads[-1:]))
    print("\nruns that differ only in the seed are one row: mean ± half-width of the 95 % t-interval")
    return 0


def cmd_sweep(args) -> int:
    from fedlab.sweep import format_ranked, parse_axis, run_sweep

    grid = dict(parse_axis(item) for item in args.set)
    if not grid:
        return _fail("sweep: give at least one axis with --set KEY=V1,V2")
    axes = tuple(args.heatmap.split(",")) if args.heatmap else tuple(list(grid)[:2]) if len(grid) >= 2 else None
    if axes and (len(axes) != 2 or any(a not in grid for a in axes)):
        return _fail(f"sweep: --heatmap {args.heatmap!r} must name two grid axes; axes: {', '.join(grid)}")
    import shlex
    from pathlib import Path

    from fedlab.interrupt import Interrupted

    name = args.name or Path(args.config).stem
    try:
        rows = run_sweep(args.config, grid, args.overrides, name, storage=args.storage, address=args.address,
                         num_cpus=args.num_cpus, cpus_per_trial=args.cpus_per_trial,
                         gpus_per_trial=args.gpus_per_trial, max_failures=args.max_failures, metric=args.metric,
                         heatmap_axes=axes, resume=not args.fresh)
    except (Interrupted, KeyboardInterrupt) as e:
        again = shlex.join(["fedlab", *[a for a in args.argv if a != "--fresh"]])
        done = f": {e.where}" if isinstance(e, Interrupted) and e.where else ""
        return _fail(f"sweep {name!r} interrupted{done}; finished trials are kept — resume with: {again}", 130)
    print(format_ranked(rows, list(grid), args.metric))
    if "seed" in grid:           # a seed axis: each point's mean and interval over its seeds
        from fedlab.sweep import format_over_seeds

        print("\nover seeds:\n" + format_over_seeds(rows, list(grid), args.metric))
    return 0


def cmd_results(args) -> int:
    """The overview of every system (RESULTS.md at the root, the README's block) from the records, and the check
    that no Markdown file types a number or verdict of its own; `--check` writes nothing and fails where the
    overview on disk is not what the records give."""
    from fedlab.evidence import prose, summary
    from fedlab.evidence.records import ROOT

    if args.todo:
        from fedlab.evidence import todo

        return todo.main()
    if args.check:
        differ = summary.stale(ROOT)
        if differ:
            from fedlab import numerics

            kind = numerics.this_kind()
            here = (f"this machine is the measured kind {kind}, not the reference: the shipped overview counts the "
                    "runs the reference kind would make, which re-make fewer seeds in worktrees" if kind else
                    f"this machine computes as no measured kind, {numerics.here_words()} (`fedlab doctor`)")
            why = ("" if numerics.is_reference_kind() or numerics.judge_as() == "reference" else
                   f" ({here}; the shipped pages are rendered as the reference kind judges records: "
                   f"{numerics.JUDGE_ENV}=reference fedlab results --check)")
            return _fail(f"{', '.join(str(p.relative_to(ROOT)) for p in differ)}: not what the records give; run "
                         f"`fedlab results`{why}", 1)
    else:
        for p in summary.write(ROOT):
            print(f"wrote {p.relative_to(ROOT)}")
    findings = prose.check(ROOT)
    for f in findings:
        print(str(f).replace("\n", " "), file=sys.stderr)
    if findings:
        return _fail(f"{len(findings)} number(s) or verdict word(s) in Markdown that no generated block shows "
                     "(above)", 1)
    return 0


def cmd_export(args) -> int:
    """A run's trained models as PEFT adapter folders (and merged Hugging Face folders) with a manifest."""
    from fedlab.export import export_run

    path = export_run(args.run, args.to, merged=args.merged)
    print(f"exported to {path.parent} (manifest: {path})")
    return 0


def cmd_eval(args) -> int:
    """lm-evaluation-harness on a run's exported model; the numbers printed and logged to the run's MLflow run."""
    import tempfile

    from fedlab.eval.harness import evaluate_run

    requested = [t.strip() for t in args.lm_eval.split(",") if t.strip()]
    if not requested:
        return _fail("eval: --lm-eval needs at least one task (embedded: every task of the run's benchmark)")
    with tempfile.TemporaryDirectory(prefix="fedlab-eval-") as work:
        scores = evaluate_run(args.run, requested, Path(work), limit=args.limit, base=args.base)
    for k in sorted(scores):
        print(f"{k}\t{scores[k]:.4f}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="fedlab", description="federated co-tuning of LLMs and SLMs")
    ap.add_argument("--debug", action="store_true", help="print the traceback of an internal error (also "
                    "FEDLAB_DEBUG=1) instead of one line and a crash report")
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run one experiment: fedlab run CONFIG [key=value ...] [--seeds 0,1,2]")
    r.add_argument("config")
    r.add_argument("overrides", nargs="*")
    r.add_argument("--seeds", default=None, help="run once per seed (e.g. 0,1,2) under one MLflow parent run; "
                                                "the table shows mean ± 95%% interval")
    r.add_argument("--jobs", type=positive_int, default=None, help="with --seeds: runs at once (default: as many as the "
                                                         "cores allow for backend.threads; 1 = one after another)")
    r.set_defaults(fn=cmd_run)
    z = sub.add_parser("zoo", help="build or list the embedded model zoo")
    z.add_argument("action", choices=["build", "list", "verify", "ship"],
                   help="build: make models available (shipped weights, else pretrain); list; verify: shipped files "
                        "against the manifest; ship: copy this machine's builds into the repository (maintainers)")
    z.add_argument("names", nargs="*")
    z.add_argument("--rebuild", action="store_true", help="build: pretrain from the recipe even when shipped or "
                                                          "cached, and say whether the weights equal the shipped ones")
    z.add_argument("--force", action="store_true", help="the same as --rebuild")
    z.set_defaults(fn=cmd_zoo)
    pl = sub.add_parser("plan", help="will it fit: parameters, traffic and training memory per role, no weights loaded")
    pl.add_argument("config")
    pl.add_argument("overrides", nargs="*")
    pl.add_argument("--dtype", default="fp32", help="weights' precision: fp32 (what fedlab loads), bf16, fp16")
    pl.add_argument("--checkpointing", action="store_true", help="plan with gradient checkpointing")
    pl.add_argument("--device-gib", type=float, default=80.0, help="memory of one device (default 80)")
    pl.add_argument("--json", default=None, help="also write the plan to this JSON file")
    pl.set_defaults(fn=cmd_plan)
    doc = sub.add_parser("doctor", help="this machine's CPU numerics against the reference digest")
    doc.set_defaults(fn=cmd_doctor)
    d = sub.add_parser("data", help="describe the data of a config (default: the embedded benchmark)")
    d.add_argument("action", choices=["describe"])
    d.add_argument("config", nargs="?")
    d.add_argument("overrides", nargs="*")
    d.set_defaults(fn=cmd_data)
    cf = sub.add_parser("config", help="show a config resolved: fedlab config show CONFIG [KEY-PREFIX] [key=value ...] "
                        "(each key's value, default, source and help)")
    cf.add_argument("action", choices=["show"], help="show: one line per key: value, default, the file (or the "
                                                     "command line) that set it, and its help")
    cf.add_argument("config")
    cf.add_argument("overrides", nargs="*", metavar="KEY-PREFIX | key=value",
                    help="keys starting with KEY-PREFIX only (e.g. method. or data.alpha); key=value overrides as "
                         "with fedlab run")
    cf.set_defaults(fn=cmd_config)
    sw = sub.add_parser("sweep", help="Ray Tune grid of full runs: fedlab sweep CONFIG --set KEY=V1,V2 [key=value ...]")
    sw.add_argument("config")
    sw.add_argument("overrides", nargs="*")
    sw.add_argument("--set", action="append", default=[], metavar="KEY=V1,V2")
    sw.add_argument("--name", default=None)
    sw.add_argument("--fresh", action="store_true")
    sw.add_argument("--address", default=None)
    sw.add_argument("--num-cpus", type=positive_int, default=None)
    sw.add_argument("--cpus-per-trial", type=float, default=1.0)
    sw.add_argument("--gpus-per-trial", type=float, default=0.0)
    sw.add_argument("--max-failures", type=int, default=1)
    sw.add_argument("--metric", default="score", choices=["score", "acc_mean", "rounds_to_target", "mb_to_target"],
                    help="rank by the method's headline metric (score), the clients' mean accuracy, or the cost to "
                         "eval.target (rounds or MB up + down; lowest first, trials that never reach it last)")
    sw.add_argument("--heatmap", default=None)
    sw.add_argument("--storage", default="sweeps/results")
    sw.set_defaults(fn=cmd_sweep)
    from fedlab import registry

    for c in registry.commands():          # the subcommands a method brings (Floe's `profile`)
        cp = sub.add_parser(c.name, help=c.help)
        registry.resolve(c.add_arguments)(cp)
        cp.set_defaults(fn=lambda args, run=c.run: registry.resolve(run)(args))
    ui = sub.add_parser("ui", help="the MLflow UI on fedlab's store (prints the runs-table address)")
    ui.add_argument("--uri", default="sqlite:///mlruns/mlflow.db")
    ui.add_argument("--artifact-root", default="mlruns/artifacts")
    ui.add_argument("--experiment", default="fedlab")
    ui.add_argument("--host", default="127.0.0.1")
    ui.add_argument("--port", type=int, default=5000)
    ui.set_defaults(fn=cmd_ui)
    ex = sub.add_parser("export", help="a run's trained models as PEFT adapter folders (and --merged Hugging Face "
                        "folders) with a manifest of their base models")
    ex.add_argument("run", help="a run folder (runs/<method>-<key>) or an MLflow run id")
    ex.add_argument("--to", required=True, help="the folder to write")
    ex.add_argument("--merged", action="store_true", help="also a merged save_pretrained folder per party")
    ex.set_defaults(fn=cmd_export)
    ev = sub.add_parser("eval", help="score a run's exported model with lm-evaluation-harness: fedlab eval RUN "
                        "--lm-eval embedded (or task names), logged to the run's MLflow run as lmeval/<task>/<metric>")
    ev.add_argument("run", help="a run folder (runs/<method>-<key>) or an MLflow run id")
    ev.add_argument("--lm-eval", required=True, metavar="TASKS",
                    help="comma-separated lm-eval tasks; 'embedded' is every task of the run's benchmark "
                         "(fedlab_<task>, offline), other names go to lm-eval unchanged")
    ev.add_argument("--limit", type=positive_int, default=None, help="at most this many items per task")
    ev.add_argument("--base", action="store_true", help="also score the base model (lmeval_base/…)")
    ev.set_defaults(fn=cmd_eval)
    rs = sub.add_parser("results", help="every system's claims by verdict, from the records: RESULTS.md and the "
                        "README's summary, and docs/getting-started.md's recorded run and zoo build times; then the "
                        "check that prose quotes only generated numbers")
    rs_mode = rs.add_mutually_exclusive_group()
    rs_mode.add_argument("--check", action="store_true", help="write nothing; exit 1 where the summary on disk differs")
    rs_mode.add_argument("--todo", action="store_true", help="write nothing; print, per system, what the rows its claims "
                    "read lack (seeds missing, not current here, at several commits), the estimated run time and "
                    "the table commands that make them, and the claims whose control fails")
    rs.set_defaults(fn=cmd_results)
    rp = sub.add_parser("report", help="compare runs read back from MLflow")
    rp.add_argument("--uri", default="sqlite:///mlruns/mlflow.db")
    rp.add_argument("--artifact-root", default="mlruns/artifacts")
    rp.add_argument("--experiment", default="fedlab")
    rp.add_argument("--limit", type=positive_int, default=50)
    rp.set_defaults(fn=cmd_report)
    return ap


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line; key=value overrides may stand before and after options
    (`fedlab sweep CONFIG --set K=V1,V2 key=value`, as its help prints)."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    unknown = [a for a in extra if a.startswith("-") or "=" not in a or not hasattr(args, "overrides")]
    if unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    if extra:
        args.overrides = [*args.overrides, *extra]
    return args


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    args.argv = argv
    if args.cmd == "data" and args.config and "=" in args.config:
        args.overrides, args.config = [args.config] + args.overrides, None
    try:
        from fedlab import numerics
        from fedlab.home import check_home

        check_home()
        numerics.check_mode()
        numerics.judge_as()          # a bad FEDLAB_JUDGE_NUMERICS is one line before anything runs
        if args.cmd != "zoo":
            return args.fn(args)
        from fedlab import interrupt

        try:        # a zoo build stops at its next pretraining step on SIGINT / SIGTERM, keeping nothing
            with interrupt.handlers():
                return args.fn(args)
        except interrupt.Interrupted as e:
            return _fail(f"interrupted ({e}); run the command again to build from the start", e.exit_code)
    except ConfigError as e:
        return _fail(str(e))
    except FileNotFoundError as e:
        return _fail(str(e))
    except ZooError as e:
        return _fail(str(e))
    except KeyboardInterrupt:       # a Ctrl-C outside a run's handlers (start-up, a table, the UI)
        print("fedlab: interrupted", file=sys.stderr)
        return 130
    except Exception as e:          # fedlab's own bug: one line and a report, the traceback with --debug
        from fedlab.runtime.context import FederationError

        if isinstance(e, FederationError):   # the federation could not go on (diverged, too few clients)
            return _fail(f"{e}; the run stopped, its MLflow run FAILED with this reason (tag fedlab.failure)", 1)
        if args.debug or os.environ.get("FEDLAB_DEBUG") == "1":
            raise
        report = crash_report(e, argv)
        return _fail(f"internal error: {type(e).__name__}: {e}; this is fedlab's bug, not your input — the "
                     f"traceback, command and environment are in {report} (--debug prints the traceback)", 1)


def crash_report(error: BaseException, argv: list[str]):
    """Write the traceback, the command line and the environment of an internal error under $FEDLAB_HOME/crash/
    (the system's temporary folder when that cannot be written); returns the file's path."""
    import datetime
    import platform
    import tempfile
    import traceback

    from fedlab.home import fedlab_home

    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    text = "\n".join([f"fedlab {' '.join(argv)}", f"python {platform.python_version()} on {platform.platform()}",
                      f"FEDLAB_HOME={os.environ.get('FEDLAB_HOME', '')}", "",
                      "".join(traceback.format_exception(error))])
    for folder in (fedlab_home() / "crash", Path(tempfile.gettempdir()) / "fedlab-crash"):
        try:
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"{stamp}-{os.getpid()}.txt"
            path.write_text(text)
            return path
        except OSError:
            continue
    return Path(tempfile.gettempdir())


if __name__ == "__main__":
    sys.exit(main())
