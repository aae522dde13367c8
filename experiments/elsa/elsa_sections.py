"""ELSA's RESULTS.md sections: the calibration and its grid, Tables 1-3 and Fig. 6 right."""
from __future__ import annotations

from fedlab.evidence import differences_table
from fedlab.evidence.runner import TABLE_SEEDS, Results
from fedlab.evidence.stats import fmt_ci

from elsa_claims import (
    ACC,
    COS,
    FULL,
    FURTHER_PAIRS,
    SHARES,
    control_bar,
    head_chance,
    reference_fails,
    simple_sl_fails,
    table3_rows,
    window_change,
)
from elsa_rows import (
    ALPHAS,
    CAL_SETTINGS,
    CENTRAL_GRID,
    CENTRAL_GRID_ROW,
    CENTRAL_GRID_TASK,
    CONTROL_PAIRS,
    CONTROL_RATIOS,
    DEPTHS,
    F6_BUDGETS,
    LONG_METHODS,
    LONG_ROUNDS,
    LONG_SETTINGS,
    LONG_WINDOW,
    METHODS,
    PAPER_METHODS,
    SIMPLE_SL_BUDGET,
    SIMPLE_SL_SETTINGS,
    SKETCH_CONTROLS,
    TABLE_DEPTH,
    TASK_BUDGET,
    TASKS,
    central_grid_key,
    f6_key,
    first_reaches,
    long_figure_name,
    long_key,
    time_to,
)


def _seeds_noted(r: Results, key: str, cell: str) -> str:
    """A cell of a row that has fewer seeds than the table's TABLE_SEEDS says how many (a table being filled:
    the header's seed list is every seed of any row, so a 4-seed row unmarked would read as a 5-seed one)."""
    n = len(r.runs(key))
    return cell if n == 0 or n >= len(TABLE_SEEDS) else f"{cell} ({n} seed{'s' if n > 1 else ''})"


def _acc_cell(r: Results, key: str, stale: set[str] = frozenset()) -> str:
    """The split path's accuracy (as deployed) with the whole model's in brackets, the collapse marker of the split
    path's answers (`fedlab.evidence.collapse`); † when the row's records were made by another config than the
    script's (older code or YAML, other weights or numerics)."""
    if not r.runs(key):
        return "-"
    from fedlab.evidence.collapse import of_records

    split = r.cell(key, ACC, 1)
    full = r.cell(key, FULL, 1) if any(FULL(rec) is not None for rec in r.runs(key)) else None
    return (_seeds_noted(r, key, split + (f" ({full})" if full and full != "-" else ""))
            + of_records(r.runs(key), SHARES).marker() + (" †" if key in stale else ""))


def _seeds_below_bar(r: Results, key: str, task: str) -> str:
    """The suffix " (k of n seeds below chance + 25)" for a control row some of whose seeds end below
    `control_bar` (a mean that passes can hide a seed that did not learn); "" when none does."""
    vals = r.values(key, ACC)
    low = sum(v < control_bar(task) for v in vals)
    return f" ({low} of {len(vals)} seeds below chance + 25)" if low else ""


def calibration_section(r: Results, stale: set[str] = frozenset(), outdated: set[str] = frozenset()) -> list[str]:
    """The positive control's rows: the uncompressed reference per task and setting, final accuracy and chance,
    flagged when some seed ends below chance + 25 points (the Controls table's rule)."""
    lines = ["## Calibration: the uncompressed pipeline learns every task at the table's budget (positive control)", "",
             "The reference: FedAvg in the split pipeline (nearest edge, size weights, every client included) with ρ = 1 "
             "and no SS-OP, at the table's budget (`base.yaml`), without mislabeled clients (the adversity trust is "
             "meant to handle); centralized = one client holding all the data. Each "
             "cell: the split path's accuracy ×100 (the whole model's in brackets); ✗ marks a row some seed of which ends below "
             "chance + 25 points, and a cell some of whose seeds end below that bar says how many; chance is the "
             "head's (topic: 10 domains).", "",
             "| task | chance | " + " | ".join(lab for lab, _ in CAL_SETTINGS.values()) + " |",
             "|---|---|" + "---|" * len(CAL_SETTINGS)]
    for task in TASKS:
        cells = []
        for key in CAL_SETTINGS:
            k = f"cal/{task}/{key}/reference"
            cells.append(_acc_cell(r, k, stale) + (" ✗" if reference_fails(r, task, key) else "")
                         + _seeds_below_bar(r, k, task))
        if any(c != "-" for c in cells):
            lines.append(f"| {task} | {100 * head_chance(task):.0f} | " + " | ".join(cells) + " |")
    per_task = []
    for task, keys in SIMPLE_SL_SETTINGS.items():
        cells = []
        for k in keys:
            key = f"cal/{task}/{k}/simple_sl"
            vals = r.values(key, ACC)
            if not vals:
                continue
            cells.append(f"{CAL_SETTINGS[k][0]} {_acc_cell(r, key, stale)}" + (" ✗" if simple_sl_fails(r, task, k) else "")
                         + _seeds_below_bar(r, key, task))
        if cells:
            per_task.append(f"{task} (chance {100 * head_chance(task):.0f}): " + "; ".join(cells))
    if per_task:
        lines += ["", "**Simple SL's own positive control** (the link uncompressed, no mislabeled clients; its one "
                      "θ₂ on the cloud takes the clients' steps in turn; at its own budget `" + " ".join(SIMPLE_SL_BUDGET)
                      + "`, which every Simple SL row carries): " + ". ".join(per_task) + ". A ✗ (some seed "
                      "below chance + 25 points) leaves the claims against Simple SL in that setting without a control."]
    return lines + central_grid_section(r, stale, outdated) + ["", "![calibration curves](calibration.png)", ""]


def central_grid_section(r: Results, stale: set[str] = frozenset(),
                         outdated: set[str] = frozenset()) -> list[str]:
    """The centralized paraphrase row's 2 × 2 of lr × τ (CENTRAL_GRID): split-path accuracy ×100 per cell, then
    each setting's effect at either value of the other, paired over seeds ([] until a cell beside the calibration
    row has records)."""
    if not any(r.runs(central_grid_key(lr, tau)) for lr, tau in CENTRAL_GRID if (lr, tau) != CENTRAL_GRID_ROW):
        return []
    lrs = sorted({lr for lr, _ in CENTRAL_GRID})
    taus = sorted({tau for _, tau in CENTRAL_GRID})
    lines = ["", f"**Which change lets the centralized {CENTRAL_GRID_TASK} row learn.** The centralized reference "
             "with only the learning rate and the logit-adjusted loss's τ changed (τ = 0: plain cross-entropy; the "
             f"federation's {CENTRAL_GRID_TASK} budget is `{' '.join(TASK_BUDGET[CENTRAL_GRID_TASK])}`, the calibration row's "
             f"{CENTRAL_GRID_ROW[0]} with τ = {CENTRAL_GRID_ROW[1]}); split-path accuracy ×100, the whole model's in "
             "brackets:", "",
             "| lr | " + " | ".join(f"τ = {tau}" for tau in taus) + " |", "|---|" + "---|" * len(taus)]
    for lr in lrs:
        lines.append(f"| {lr} | " + " | ".join(_acc_cell(r, central_grid_key(lr, tau), stale) for tau in taus) + " |")
    pairs = [(f"lr {lrs[1]} − lr {lrs[0]}, τ = {tau}", central_grid_key(lrs[1], tau), "acc/mean",
              central_grid_key(lrs[0], tau), "acc/mean") for tau in taus]
    pairs += [(f"τ = {taus[1]} − τ = {taus[0]}, lr {lr}", central_grid_key(lr, taus[1]), "acc/mean",
               central_grid_key(lr, taus[0]), "acc/mean") for lr in lrs]
    diffs = differences_table(r, pairs, digits=1, scale=100, outdated=outdated)
    return lines + (["", "Each setting's effect at either value of the other, paired over seeds (accuracy ×100):",
                     "", *diffs] if diffs else [])


def table1(r: Results, stale: set[str], outdated: set[str] = frozenset()) -> list[str]:
    """Table 1 (split path, whole model in brackets), a ✗ on a task and α̂ whose skewed reference failed the
    positive control, the tasks on which every method answers one constant, and the claims with verdicts and MDE."""
    lines = ["## Table 1: accuracy (×100)", "",
             "✗ after α̂: the uncompressed reference failed the positive control at this skew (Calibration), so the "
             "row cannot show a method's effect; a Vanilla cell says how many of its seeds end below chance + 25. † : records made by another config than the script's. The last "
             "column is fedlab's ablation, not the paper's: FedAvg with the link uncompressed, against which Vanilla "
             "(ELSA's trust and α_k, uncompressed) shows what trust does where the link carries the signal.", "",
             "| task | α̂ | " + " | ".join(lab for lab, _ in METHODS.values()) + " |", "|---|---|" + "---|" * len(METHODS)]
    const = []
    for task in TASKS:
        for alpha in ALPHAS:
            keys = [f"t1/{task}/a{alpha}/{k}" for k in METHODS]
            # Vanilla is the uncompressed pipeline with ELSA's trust: a seed of it below the control's bar is named
            cells = [_acc_cell(r, k, stale) + (_seeds_below_bar(r, k, task) if k.endswith("/vanilla") else "")
                     for k in keys]
            if any(c != "-" for c in cells):
                mark = " ✗" if reference_fails(r, task, f"a{alpha}") else ""
                lines.append(f"| {task} | {alpha}{mark} | " + " | ".join(cells) + " |")
                if "constant" in r.constant_answers(keys).values():
                    const.append(f"{task} α̂ = {alpha}")
    if const:
        lines += ["", f"**Constant answers**: on {', '.join(const)} every method gives one constant answer in every "
                      "seed — those rows cannot separate the methods."]
    lines += ["", "The paper's claims on this table are in the Claims table at the top of the page (split-path accuracy, "
              "each behind its task's reference)."]
    ablation = differences_table(r, [(f"Vanilla − FedAvg (both ρ = 1, no SS-OP), {task}, α̂ = {alpha}",
                                      f"t1/{task}/a{alpha}/vanilla", "acc/mean", f"t1/{task}/a{alpha}/fedavg_raw",
                                      "acc/mean") for task in TASKS for alpha in ALPHAS], digits=1, scale=100,
                                 outdated=outdated)
    if ablation:
        lines += ["", "### fedlab's ablation, not a paper claim: trust grouping and α_k with the link uncompressed",
                  "", "Vanilla (ELSA's trust and α_k) against FedAvg (nearest edge, size weights), both uncompressed, "
                  "paired over seeds, accuracy ×100.", "", *ablation]
    further = differences_table(r, [(f"{METHODS[a][0]} − {METHODS[b][0]}, {task}, α̂ = {alpha}", f"t1/{task}/a{alpha}/{a}",
                                     "acc/mean", f"t1/{task}/a{alpha}/{b}", "acc/mean")
                                    for task in TASKS for alpha in ALPHAS for a, b in FURTHER_PAIRS], digits=1, scale=100,
                                    outdated=outdated)
    if further:
        lines += ["", "### fedlab's further pairings, not paper claims (looked at after the runs: one of many looks)",
                  "", "Accuracy ×100, paired over seeds.", "", *further, ""]
        lines += [sign_count(r, a, b) for a, b in (("elsa", "fedavg"), ("elsa", "fedavg_random"))]
    return lines


def sign_count(r: Results, a: str, b: str) -> str:
    """One line: in how many (Table 1 cell, seed) pairs row a's split-path accuracy is above row b's, pooled over
    every cell both hold, with the two-sided sign test's p (ties left out)."""
    from scipy.stats import binomtest

    above = below = cells = 0
    for task in TASKS:
        for alpha in ALPHAS:
            x = r.by_seed(f"t1/{task}/a{alpha}/{a}", "acc/mean")
            y = r.by_seed(f"t1/{task}/a{alpha}/{b}", "acc/mean")
            common = set(x) & set(y)
            cells += bool(common)
            above += sum(x[s] > y[s] for s in common)
            below += sum(x[s] < y[s] for s in common)
    if not above + below:
        return ""
    p = binomtest(above, above + below, 0.5).pvalue
    return (f"Pooled over the {cells} cells: {METHODS[a][0]} above {METHODS[b][0]} in {above} of {above + below} "
            f"paired (cell, seed)s, below in {below} (sign test p = {p:.2g}).  ")


def table1_long(r: Results, stale: set[str] = frozenset(), outdated: set[str] = frozenset()) -> list[str]:
    """`table1_long_cell` of every LONG_SETTINGS cell that has records."""
    return [line for task, alpha in LONG_SETTINGS for line in table1_long_cell(r, task, alpha, stale, outdated)]


def table1_long_cell(r: Results, task: str, alpha: str, stale: set[str] = frozenset(),
                     outdated: set[str] = frozenset()) -> list[str]:
    """A Table 1 cell at LONG_ROUNDS rounds for ELSA and the sketched baselines that differ from it only in
    grouping and aggregation weights: final accuracy, the fitted change over the last LONG_WINDOW rounds (a curve
    that still climbs has not converged), the constant-answer flag, and the claims paired over seeds; [] before
    any record."""
    keys = {m: long_key(task, alpha, m) for m in LONG_METHODS}
    if not any(r.runs(k) for k in keys.values()):
        return []
    first = LONG_ROUNDS - LONG_WINDOW
    change = lambda rec: window_change(rec, LONG_ROUNDS, LONG_WINDOW)
    lines = ["", f"### Table 1 at {LONG_ROUNDS} rounds (fedlab's longer budget; {task}, α̂ = {alpha})", "",
             "At the calibrated 80 rounds the sketched columns are near chance (above). The same rows at "
             f"{LONG_ROUNDS} rounds (`LONG_BUDGET`): ELSA against the sketched baselines that differ from it only in "
             "grouping and aggregation weights (FedAvg, FedAvg (Random): nearest edge or random groups, with size "
             "weights; ELSA: trust grouping and α_k); Simple SL (one θ₂ on the cloud that every client steps in turn, "
             "size weights, at its own learning rate `" + " ".join(SIMPLE_SL_BUDGET) + "`); and FedCAda (the highest "
             "sketched baseline in Table 1's topic α̂ = 0.2 cell at 80 rounds, and the paper's RTE comparison). Last "
             f"column: the least-squares slope of the accuracy over rounds {first}–"
             f"{LONG_ROUNDS} times {LONG_WINDOW}, ×100 (an interval that holds 0: no climb left that the seeds can "
             "see). Vanilla at 80 rounds, for scale: "
             f"{_acc_cell(r, f't1/{task}/a{alpha}/vanilla', stale)}; chance {100 * head_chance(task):.0f}.", "",
             f"| method | accuracy (×100) | uplink cosine | change over rounds {first}–{LONG_ROUNDS} |",
             "|---|---|---|---|"]
    for m, k in keys.items():
        if r.runs(k):
            changes = r.values(k, change)
            note = "" if len(changes) == len(r.runs(k)) else f" ({len(changes)} of {len(r.runs(k))} seeds)"
            lines.append(f"| {METHODS[m][0]} | {_acc_cell(r, k, stale)} | {r.cell(k, COS, 3)} | "
                         f"{fmt_ci(changes, 1, signed=True)}{note} |")
    if "constant" in r.constant_answers([k for k in keys.values() if r.runs(k)]).values():
        lines += ["", f"**Constant answers**: every method gives one constant answer in every seed at {LONG_ROUNDS} "
                      "rounds."]
    return lines + ["", f"![Table 1 at {LONG_ROUNDS} rounds, {task}: learning curves]({long_figure_name(task)})"]


def table2(r: Results, stale: set[str] = frozenset(), outdated: set[str] = frozenset()) -> list[str]:
    """Table 2: each paper method's link time until it first reaches the target: the lowest plateau (mean final
    accuracy) among the paper's methods that learn, i.e. end 5 points or more above chance (fedlab's ablation column
    neither enters the target nor the table). A method whose plateau is below that is reported as never reaching
    it: taking its plateau as the target would set a bar every model meets before it learns. Not informative when no
    method learns, or when every learner's run is at the target at its first evaluation. A row another config made
    (`outdated`) does not set the target while a current one learns (where none does, the target carries a †);
    cells of `stale` rows carry a †."""
    lines = ["", "## Table 2: link time (s) to the target accuracy (the lowest plateau of the compared methods that learn)",
             "", "Link time: the measured bytes at each client's bandwidth plus two round trips a step (to the edge, or "
             "to the cloud for Simple SL), the slowest client of each round (Simple SL: the clients' times added, as they "
             "take the cloud's θ₂ in turn), summed over rounds. Target: the lowest mean final accuracy among the methods "
             "that end 5 points or more above chance; a method that stays below is marked *never*. (k of n): only k of "
             "the n seeds reach the target; the time is their mean. †: records made by another config, other numerics or "
             "other weights than the script's; a row another config made sets the target only where no current row learns.", "",
             "| task | α̂ | target | " + " | ".join(METHODS[k][0] for k in PAPER_METHODS) + " |",
             "|---|---|---|" + "---|" * len(PAPER_METHODS)]
    for task in TASKS:
        for alpha in ALPHAS:
            keys = [f"t1/{task}/a{alpha}/{k}" for k in PAPER_METHODS]
            finals = [r.values(k, lambda rec: rec["final"]["acc/mean"]) for k in keys]
            if not all(finals):
                continue
            plateaus = {k: sum(v) / len(v) for k, v in zip(keys, finals)}
            learners = [k for k, p in plateaus.items() if p >= head_chance(task) + 0.05]
            setters = [k for k in learners if k not in outdated] or learners     # current rows set it where any learn
            target = min((plateaus[k] for k in setters), default=max(plateaus.values()))
            mark = " †" if setters and min(setters, key=plateaus.get) in outdated else ""
            if not learners or all(first_reaches(rec, target) for k in learners for rec in r.runs(k)):
                why = ("every compared method's plateau is within 5 points of chance" if not learners else
                       "every run of the methods that learn is at the target at its first evaluation")
                lines.append(f"| {task} | {alpha} | {100 * target:.1f}{mark} | {why} ({100 * head_chance(task):.0f} is "
                             "chance): not informative |" + " - |" * (len(keys) - 1))
                continue
            cells = []
            for k in keys:
                times = [time_to(rec, target) for rec in r.runs(k)]
                reached = [t for t in times if t is not None]
                cell = (f"never (plateau {100 * plateaus[k]:.1f})" if not reached else fmt_ci(reached, 1)
                        + ("" if len(reached) == len(times) else f" ({len(reached)} of {len(times)})"))
                cells.append(cell + (" †" if k in stale else ""))
            lines.append(f"| {task} | {alpha} | {100 * target:.1f}{mark} | " + " | ".join(cells) + " |")
    return lines


def fig6_right(r: Results, stale: set[str] = frozenset(), outdated: set[str] = frozenset()) -> list[str]:
    """Fig. 6 right: ELSA's split-path accuracy against the client-side depth p (split [p, 5 − p, 1]) at the
    calibrated budget and at LONG_ROUNDS, and the paper's claim that accuracy drops once the client holds half the
    blocks or more (its p ≥ 6 of 12; here p ≥ 3 of 6), paired over seeds against p = 2, the deepest client part
    under half; [] before any record."""
    if not any(r.runs(f6_key(p, long)) for p in DEPTHS for long, _ in F6_BUDGETS if not (long and p == TABLE_DEPTH)):
        return []
    lines = ["", "## Fig. 6 right: ELSA against the client-side depth p (topic, α̂ = 0.1)", "",
             f"Split [p, 5 − p, 1] of the 6-block encoder; p = {TABLE_DEPTH} is Table 1's ELSA (its rows at "
             f"{LONG_ROUNDS} rounds are the 320-round block's). Split-path accuracy ×100 (the whole model's in "
             f"brackets); chance {100 * head_chance('topic'):.0f}.", "",
             "| p | split | " + " | ".join(label for _, label in F6_BUDGETS) + " |", "|---|---|---|---|"]
    for p in DEPTHS:
        lines.append(f"| {p} | [{p}, {5 - p}, 1] | "
                     + " | ".join(_acc_cell(r, f6_key(p, long), stale) for long, _ in F6_BUDGETS) + " |")
    lines += depth_reproduction(r)
    return lines


def depth_reproduction(r: Results) -> list[str]:
    """p = TABLE_DEPTH at 80 rounds is its own row, the same config as Table 1's ELSA row, run again: the seeds both
    hold, and those whose learning curves (every evaluated round's split-path and whole-model accuracy) differ."""
    own, table = f6_key(TABLE_DEPTH), "t1/topic/a0.1/elsa"
    curves = lambda key: {rec["seed"]: (rec.get("summary") or {}).get("curve") for rec in r.runs(key)}
    a, b = curves(own), curves(table)
    both = sorted(set(a) & set(b))
    if not both:
        return []
    differ = [s for s in both if a[s] != b[s]]
    verdict = (f"its curves equal Table 1's in every evaluated round, in each of the {len(both)} seeds the two rows share"
               if not differ else f"its curves DIFFER from Table 1's in seed{'s' if len(differ) > 1 else ''} "
               f"{', '.join(map(str, differ))} of the {len(both)} seeds the two rows share")
    return ["", f"p = {TABLE_DEPTH} at 80 rounds is its own row (`{own}`), the same config as Table 1's ELSA row "
                f"(`{table}`), run again as a reproduction check: {verdict}."]


def table3_controls(r: Results, outdated: set[str] = frozenset()) -> list[str]:
    """Each sketch control against ELSA's sketch at the same ρ, paired over the seeds both hold (split-path
    accuracy ×100): what Y = 1, hashes re-drawn per step, noise of the sketch's MSE and Y = 1 with re-drawn hashes
    each change; and each CONTROL_PAIRS control against the control it differs from by one setting."""
    key_of = {(ratio, suffix): key for ratio, suffix, _, key, _ in table3_rows()}
    pairs = [(f"{label} − ELSA (Y = 3, fixed), ρ = {ratio}", key, "acc/mean", key_of[ratio, ""], "acc/mean")
             for ratio, suffix, label, key, _ in table3_rows() if suffix]
    pairs += [(f"{SKETCH_CONTROLS[a][0]} − {SKETCH_CONTROLS[b][0]}, ρ = {ratio}", key_of[ratio, f"/{a}"], "acc/mean",
               key_of[ratio, f"/{b}"], "acc/mean") for ratio in CONTROL_RATIOS for a, b in CONTROL_PAIRS]
    diffs = differences_table(r, pairs, digits=1, scale=100, outdated=outdated)
    return ["", "Each control against ELSA's sketch at the same ρ, paired over the seeds both hold (accuracy ×100):",
            "", *diffs] if diffs else []
