"""ELSA's positive controls and claims: the reference's bar per task, and the paper's claims each resting on it."""
from __future__ import annotations

import functools

from fedlab.evidence import Claim, above_chance, metric_shares
from fedlab.evidence.runner import Results

from elsa_rows import (
    ALPHAS,
    CONTROL_RATIOS,
    DEPTHS,
    F6_BUDGETS,
    HERE,
    LONG_METHODS,
    LONG_ROUNDS,
    LONG_SETTINGS,
    RATIOS,
    SIMPLE_SL_SETTINGS,
    SKETCH_CONTROLS,
    TASKS,
    f6_key,
    long_key,
)


def head_chance(task: str) -> float:
    """Chance accuracy of ELSA's head on `task`: it scores the union of the task's choices (`chains.task_classes`),
    so topic is 10-way (every domain), not the 4 choices an example shows its prompt-scored models; the two-way
    tasks stay at 1/2."""
    from fedlab.data.tasks import TASKS as ALL
    from fedlab.data.world import DOMAINS

    return 1 / len(DOMAINS) if task == "topic" else ALL[task].chance


def control_bar(task: str) -> float:
    """The positive control's bar on `task`, ×100: chance + 25 points."""
    return 100 * head_chance(task) + 25


def control_fails(r: Results, key: str, task: str) -> bool:
    """Whether some seed of the control row `key` ends below `control_bar` on `task` — the control does not hold
    (the Controls table's rule; False without records)."""
    vals = r.values(key, lambda rec: 100 * rec["final"]["acc/mean"])
    return any(v < control_bar(task) for v in vals)


def reference_fails(r: Results, task: str, setting: str) -> bool:
    """Whether the uncompressed reference on `task` in calibration `setting` (a key of CAL_SETTINGS) fails the
    positive control: then no comparison on it can show an effect."""
    return control_fails(r, f"cal/{task}/{setting}/reference", task)


def simple_sl_fails(r: Results, task: str, setting: str) -> bool:
    """Whether Simple SL's own positive control (uncompressed, `cal/{task}/{setting}/simple_sl`, setting a key of
    CAL_SETTINGS) fails on average: then no claim against Simple SL on that task and skew can show ELSA's effect."""
    return control_fails(r, f"cal/{task}/{setting}/simple_sl", task)


ACC = lambda rec: 100 * rec["final"]["acc/mean"]
FULL = lambda rec: 100 * rec["final"]["full/acc/mean"] if "full/acc/mean" in rec["final"] else None
COS = lambda rec: rec["final"].get("link/cosine")


# the paper's Table 1 on RTE (entailment), ELSA (80.93 / 83.13 at α̂ = 0.1 / 0.2) against each baseline; the
# other tasks have no number in the paper (Fig. 4's curves only)
RTE = {"0.1": {"fedavg": "80.93 vs 79.21 (+1.72)", "fedavg_random": "80.93 vs 78.48 (+2.45)",
               "fedavg>random": "79.21 vs 78.48 (+0.73)", "fedcada": "80.93 vs 79.23 (+1.70)"},
       "0.2": {"fedavg": "83.13 vs 79.91 (+3.22)", "fedavg_random": "83.13 vs 79.03 (+4.10)",
               "fedavg>random": "79.91 vs 79.03 (+0.88)", "fedcada": "83.13 vs 81.31 (+1.82)"}}


def paper_number(task: str, alpha: str, comparison: str) -> str:
    """The paper's Table 1 number for `comparison` (a RTE key: "fedavg", "fedavg_random", "fedavg>random",
    "fedcada") on `task` at α̂ = `alpha`: RTE's for entailment, else "no number for this task"."""
    numbers = RTE.get(alpha, {}) if task == "entailment" else {}
    return numbers.get(comparison, "no number for this task")


def reference(task: str, setting: str, prefix: str = ""):
    """The positive control of a task in a calibration setting (a key of CAL_SETTINGS): the uncompressed reference
    ends at `control_bar` or above in every seed. `prefix`: the same control on a budget grid's rows
    (`budget.py`, e.g. "lr0.002/")."""
    return above_chance(f"reference, {task} {setting}", [f"{prefix}cal/{task}/{setting}/reference"], [task],
                        lambda rec, _t: rec["final"].get("acc/mean"), head_chance, 25)


def simple_sl_control(task: str, setting: str, prefix: str = ""):
    """Simple SL's own control (uncompressed, at its own rate) where the calibration plans it, else None.
    `prefix`: the same control on a budget grid's rows (`budget.py`)."""
    if setting.removeprefix("a") not in [k.removeprefix("a") for k in SIMPLE_SL_SETTINGS.get(task, ())]:
        return None
    return above_chance(f"Simple SL uncompressed, {task} {setting}", [f"{prefix}cal/{task}/{setting}/simple_sl"], [task],
                        lambda rec, _t: rec["final"].get("acc/mean"), head_chance, 25)


ACC_MEAN = lambda rec: rec["final"]["acc/mean"]
SHARES = metric_shares("acc/mean")


def _claim(text, source, paper, a, b, control, **kw):
    return Claim(text, source, paper, a, b, ACC_MEAN, control=control, shares=SHARES, **kw)


def left_out(grid_records: Results, grids=None) -> dict[str, str]:
    """{task: why}: the tasks whose reference misses the bar in some seed on validation data at every rate its grid
    tried (`budget.py`, as `grids`, loaded when None), each rate on every seed it holds in `grid_records`: no rate
    tried teaches the task in every seed, so it stays in the tables and leaves every claim. {} for a task whose
    grid has not chosen yet (some rate short of the seeds a choice needs)."""
    from fedlab.evidence import budget
    from fedlab.evidence.controls import check
    from fedlab.evidence.summary import load_table

    grids = grids or load_table("elsa", script="budget")
    out = {}
    for task, (_, g) in grids.grids().items():
        if task not in TASKS or budget.chosen(grid_records, g) is None:
            continue
        misses = {v: "; ".join(f"{st.control.name}: {st.failing()}" for c in g.controls(g.prefix(v))
                               if not (st := check(grid_records, c)).holds)
                  for v in g.values}
        if all(misses.values()):
            out[task] = ("its reference misses the bar in some seed on validation data at every rate tried ("
                         + "; ".join(f"`{g.key}={v}`: {why}" for v, why in misses.items()) + ")")
    return out


@functools.cache
def tasks_left_out() -> dict[str, str]:
    """`left_out` on the budget page's records (its results.json; {} before it has any), read once: the claims
    and the results page's rates sentence both read it."""
    from fedlab.evidence.summary import load_table

    grids = load_table("elsa", script="budget")
    path = grids.OUT / "results.json"
    return left_out(Results(path), grids) if path.is_file() else {}


def claimed_tasks() -> tuple[str, ...]:
    """The tasks the claims read: every task of TASKS but those `tasks_left_out`."""
    gone = tasks_left_out()
    return tuple(t for t in TASKS if t not in gone)


def table1_claims(r: Results = None) -> list[Claim]:
    """The paper's Table 1 and Figs. 5–6 claims on each claimed task (`claimed_tasks`) and α̂, scored on the split
    path as deployed, each resting on the reference of its task and skew (and Simple SL's own control for the claims against it). The
    paper's numbers: RTE for entailment (Table 1); Fig. 4 (topic, sentiment: curves, no number); Fig. 6 left's
    smallest gain over Simple SL."""
    out = []
    for task in claimed_tasks():
        for alpha in ALPHAS:
            k = lambda m, task=task, alpha=alpha: f"t1/{task}/a{alpha}/{m}"
            where = f"{task}, α̂ = {alpha}"
            ref = reference(task, f"a{alpha}")
            paper = lambda c, task=task, alpha=alpha: paper_number(task, alpha, c)
            out += [_claim(f"ELSA > FedAvg, {where}", "Table 1", paper("fedavg"), k("elsa"), k("fedavg"), ref),
                    _claim(f"ELSA > FedAvg (Random), {where}", "Table 1", paper("fedavg_random"), k("elsa"),
                           k("fedavg_random"), ref),
                    _claim(f"FedAvg > FedAvg (Random): trust-free grouping costs, {where}", "Table 1 text",
                           paper("fedavg>random"), k("fedavg"), k("fedavg_random"), ref)]
            if alpha == "0.1":
                sl = simple_sl_control(task, f"a{alpha}")
                out += [_claim(f"ELSA ≈ uncompressed Vanilla (within 2 points), {where}", "Fig. 5",
                               "comparable at fewer link bytes", k("elsa"), k("vanilla"), ref, at_least=True),
                        _claim(f"ELSA > Simple SL, {where}", "Fig. 6 left", "+1.4 to +3.8 (+1.4)", k("elsa"),
                               k("simple_sl"), (ref, sl) if sl else ref)]
    return out


def claims(r: Results = None) -> list[Claim]:
    """Every claim of the system: Table 1 at 80 rounds, at LONG_ROUNDS rounds, and Fig. 6 right."""
    claimed = claimed_tasks()
    return table1_claims(r) + [c for task, alpha in LONG_SETTINGS if task in claimed
                               for c in long_claims(task, alpha)] + f6_claims()


# Table 1 pairings beside the paper's claims: ELSA against the baselines the claims table leaves out, and Simple SL's
# one cloud θ₂ against the edges' θ₂ (FedAvg, FedAvg (Random))
FURTHER_PAIRS = (("elsa", "fedprox"), ("elsa", "fedams"), ("elsa", "fedcada"), ("elsa", "simple_sl"),
                 ("simple_sl", "fedavg"), ("simple_sl", "fedavg_random"))


def curve_at(record: dict, rnd: int) -> float | None:
    """The split-path accuracy the run's learning curve holds at round `rnd` (None: not evaluated there)."""
    return next((acc for x, acc, *_ in (record.get("summary") or {}).get("curve", []) if x == rnd), None)


def window_change(record: dict, end: int, window: int) -> float | None:
    """The least-squares slope of the split-path accuracy over the evaluated rounds in [end − window, end], times
    `window`: the change the fitted line makes over the window, ×100 (None without the window's two end points
    and a third one). b = Σ(x − x̄)(y − ȳ) / Σ(x − x̄)², from every point, so one evaluation's sampling noise
    weighs less than in the end points' difference."""
    pts = [(x, acc) for x, acc, *_ in (record.get("summary") or {}).get("curve", []) if end - window <= x <= end]
    xs = {x for x, _ in pts}
    if len(pts) < 3 or end not in xs or end - window not in xs:
        return None
    mx, my = sum(x for x, _ in pts) / len(pts), sum(y for _, y in pts) / len(pts)
    slope = sum((x - mx) * (y - my) for x, y in pts) / sum((x - mx) ** 2 for x, _ in pts)
    return 100 * slope * window


def long_claims(task: str, alpha: str) -> list[Claim]:
    """The Table 1 claims of one LONG_SETTINGS cell at LONG_ROUNDS rounds, behind the same references as at 80."""
    keys = {m: long_key(task, alpha, m) for m in LONG_METHODS}
    where = f"{task}, α̂ = {alpha}, {LONG_ROUNDS} rounds"
    paper = lambda c: paper_number(task, alpha, c)
    ref = reference(task, f"a{alpha}")
    sl = simple_sl_control(task, f"a{alpha}")
    return [_claim(f"ELSA > FedAvg, {where}", "Table 1", paper("fedavg"), keys["elsa"], keys["fedavg"], ref),
            _claim(f"ELSA > FedAvg (Random), {where}", "Table 1", paper("fedavg_random"), keys["elsa"],
                   keys["fedavg_random"], ref),
            _claim(f"ELSA > Simple SL, {where}", "Fig. 6 left", "+1.4 to +3.8 (+1.4)", keys["elsa"],
                   keys["simple_sl"], (ref, sl) if sl else ref),
            _claim(f"FedAvg > FedAvg (Random): trust-free grouping costs, {where}", "Table 1 text",
                   paper("fedavg>random"), keys["fedavg"], keys["fedavg_random"], ref),
            _claim(f"ELSA > FedCAda, {where}", "Table 1", paper("fedcada"), keys["elsa"], keys["fedcada"], ref)]


def f6_claims() -> list[Claim]:
    """Fig. 6 right: accuracy drops once the client holds half the blocks or more (p ≥ 3 of 6), against p = 2, the
    deepest client part under half; behind topic α̂ = 0.1's reference."""
    ref = reference("topic", "a0.1")
    return [_claim(f"ELSA p = 2 > p = {p}: a client part of half the blocks or more costs, {label}", "Fig. 6 right",
                   "drops sharply at p ≥ half the blocks (no number)", f6_key(2, long), f6_key(p, long), ref)
            for long, label in F6_BUDGETS for p in DEPTHS if p > 2]


def table3_rows():
    """Table 3's rows in order: (ρ, suffix, label, row key, sketch rows Y) for ELSA's sketch and each control at
    every ratio. ELSA at the default ρ = 4.2 is Table 1's topic row."""
    variants = [("", "ELSA (Y = 3, fixed)")] + [(f"/{k}", lab) for k, (lab, _) in SKETCH_CONTROLS.items()]
    for ratio in sorted({*RATIOS, *CONTROL_RATIOS}, key=float):
        for suffix, label in variants:
            key = "t1/topic/a0.1/elsa" if (ratio, suffix) == ("4.2", "") else f"t3/topic/rho{ratio}{suffix}"
            rows = 1 if suffix and "method.sketch_rows=1" in SKETCH_CONTROLS[suffix[1:]][1] else 3
            yield ratio, suffix, label, key, rows


def table_dim() -> int:
    """D, the hidden size of the model the Table 3 rows run (dirichlet.yaml's: tiny-bert's 128)."""
    from fedlab.config import load_config
    from fedlab.methods.elsa.chains import model_dims

    return model_dims(load_config(HERE / "dirichlet.yaml", []).model.name)[1]


def sketch_shape(ratio: float, rows: int, dim: int) -> tuple[str, float]:
    """('Y × Z (ρ achieved)', the dense-vector cosine) of the sketch `sketch_for_ratio` builds for D = `dim` at
    this ρ and Y: 1/√(1 + (D − 1)/Z) for one row, the median of three rows by simulation (`sketch_theory`)."""
    from fedlab.comm.sketch import sketch_for_ratio
    from fedlab.comm.sketch_theory import dense_cosine, one_row_cosine

    s = sketch_for_ratio(dim, ratio, 0, rows=rows)
    cos = one_row_cosine(dim, s.cols) if rows == 1 else dense_cosine(dim, s.rows, s.cols)
    return f"{s.rows} × {s.cols} ({s.ratio:.2f})", cos
