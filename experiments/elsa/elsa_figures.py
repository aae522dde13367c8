"""ELSA's figures beside RESULTS.md: fig5, fig6, table3, calibration and the long-run curves."""
from __future__ import annotations

from pathlib import Path

from fedlab.evidence.runner import Results

from elsa_claims import COS, curve_at, head_chance, table3_rows, table_dim
from elsa_rows import (
    CAL_SETTINGS,
    DEPTHS,
    F6_BUDGETS,
    HERE,
    LONG_METHODS,
    LONG_ROUNDS,
    LONG_SETTINGS,
    METHODS,
    TASKS,
    f6_key,
    long_figure_name,
    long_key,
)


def figures(r: Results, folder: Path = HERE) -> None:
    """calibration.png, fig5.png, fig6.png and table3.png in `folder` (module docstring) from the rows that exist;
    means over seeds, 95 % intervals."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from fedlab.evidence.stats import mean_ci

    def point(key, fn):
        v = [x for x in r.values(key, fn) if x is not None]
        return mean_ci(v) if v else None

    acc = lambda rec: rec["final"]["acc/mean"]
    link = lambda rec: rec["final"].get("server/link_bytes")

    def pair(ax, a, b, title, bytes_ratio=False):
        groups = [t for t in TASKS if point(f"t1/{t}/a0.1/{a}", acc) and point(f"t1/{t}/a0.1/{b}", acc)]
        for i, k in enumerate((a, b)):
            pts = [point(f"t1/{t}/a0.1/{k}", acc) for t in groups]
            ax.bar([j + (i - 0.5) * 0.4 for j in range(len(groups))], [p[0] for p in pts], 0.4,
                   yerr=[p[1] for p in pts], capsize=3, label=METHODS[k][0])
        labels = []
        for t in groups:
            la, lb = point(f"t1/{t}/a0.1/{a}", link), point(f"t1/{t}/a0.1/{b}", link)
            ok = bytes_ratio and la and lb and la[0]
            labels.append(f"{t}\n{lb[0] / la[0]:.2f}× fewer link bytes" if ok else t)
        for j, t in enumerate(groups):        # the head's chance level under each task's pair of bars
            ax.hlines(head_chance(t), j - 0.45, j + 0.45, colors="k", linestyles="dashed", linewidth=1,
                      label="chance" if j == 0 else None)
        ax.set_xticks(range(len(groups)))
        ax.set_xticklabels(labels, fontsize=8)
        ax.set_ylabel("accuracy")
        ax.set_ylim(0, 1)
        ax.set_title(title, fontsize=9)
        ax.grid(alpha=0.3, axis="y")
        ax.legend(fontsize=8)

    cal = [(t, k) for t in TASKS for k in CAL_SETTINGS if r.runs(f"cal/{t}/{k}/reference")]
    if cal:
        fig, axes = plt.subplots(1, len(TASKS), figsize=(4 * len(TASKS), 3.4), sharey=True)
        for ax, task in zip(axes, TASKS):
            for k, (label, _) in CAL_SETTINGS.items():
                runs = r.runs(f"cal/{task}/{k}/reference")
                if not runs:
                    continue
                rounds = sorted({c[0] for rec in runs for c in rec["summary"]["curve"]})
                mean = [sum(c[1] for rec in runs for c in rec["summary"]["curve"] if c[0] == x) / len(runs)
                        for x in rounds]
                ax.plot(rounds, mean, marker="o", label=f"{label} ({len(runs)} seeds)")
            ax.set_title(f"uncompressed reference on {task}", fontsize=9)
            ax.set_xlabel("round")
            ax.grid(alpha=0.3)
        axes[0].set_ylabel("split-path accuracy")
        axes[0].set_ylim(0, 1)
        axes[0].legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(folder / "calibration.png", dpi=100)
        plt.close(fig)
    fig, ax = plt.subplots(figsize=(6, 4))
    pair(ax, "elsa", "vanilla", "Fig. 5 analogue: ELSA vs the uncompressed Vanilla (α̂ = 0.1)", bytes_ratio=True)
    fig.tight_layout()
    fig.savefig(folder / "fig5.png", dpi=100)
    plt.close(fig)
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    pair(left, "elsa", "simple_sl", "Fig. 6 left: ELSA vs Simple SL (α̂ = 0.1)")
    drawn = 0
    for long, label in F6_BUDGETS:
        pts = [(p, q) for p in DEPTHS if (q := point(f6_key(p, long), acc))]
        if pts:   # the two budgets side by side at each p, so their intervals do not overlap
            right.errorbar([p + (0.06 if long else -0.06) for p, _ in pts], [q[0] for _, q in pts],
                           yerr=[q[1] for _, q in pts], marker="o", capsize=3, label=label)
            drawn += 1
    if not drawn:
        right.text(0.5, 0.6, "no f6/ rows yet (--only f6/)", ha="center", va="center", transform=right.transAxes)
    right.axhline(head_chance("topic"), color="k", linestyle="dashed", linewidth=1, label="chance")
    right.set_ylim(0, 1)
    right.legend(fontsize=8)
    right.set_xticks(DEPTHS)
    right.set_xlabel("client-side blocks p (split [p, 5 − p, 1])")
    right.set_ylabel("accuracy (topic, α̂ = 0.1)")
    right.set_title("Fig. 6 right: depth of the client's part", fontsize=9)
    right.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(folder / "fig6.png", dpi=100)
    plt.close(fig)
    sketch_figure(r, folder / "table3.png", point, acc, table_dim())
    for task, alpha in LONG_SETTINGS:
        long_figure(r, folder / long_figure_name(task), task, alpha)


def long_figure(r: Results, path: Path, task: str = "topic", alpha: str = "0.1") -> list[str]:
    """`long_figure_name(task)`: the split-path learning curves of a LONG_SETTINGS cell's t1long/ rows (mean over
    seeds, 95 % band), with Vanilla's 80-round curve and chance as references; the labels of the curves drawn ([]
    and no file without the cell's rows). Each method keeps its colour while rows are being filled."""
    import matplotlib.pyplot as plt

    from fedlab.evidence.stats import mean_ci

    if not any(r.runs(long_key(task, alpha, m)) for m in LONG_METHODS):
        return []
    fig, ax = plt.subplots(figsize=(7, 4))
    drawn = []
    for i, (m, key) in enumerate([*((m, long_key(task, alpha, m)) for m in LONG_METHODS),
                                  ("vanilla", f"t1/{task}/a{alpha}/vanilla")]):
        runs = r.runs(key)
        if not runs:
            continue
        rounds = sorted({c[0] for rec in runs for c in (rec.get("summary") or {}).get("curve", [])})
        pts = [(x, mean_ci(v)) for x in rounds if (v := [a for rec in runs if (a := curve_at(rec, x)) is not None])]
        if not pts:
            continue
        xs, mean, half = [x for x, _ in pts], [c[0] for _, c in pts], [c[1] for _, c in pts]
        label = METHODS[m][0] + (", 80 rounds" if m == "vanilla" else "")
        label += f" ({len(runs)} seed{'s' if len(runs) > 1 else ''})"
        ax.plot(xs, mean, marker=".", color=f"C{i}", label=label)
        ax.fill_between(xs, [a - b for a, b in zip(mean, half)], [a + b for a, b in zip(mean, half)], color=f"C{i}",
                        alpha=0.15)
        drawn.append(label)
    ax.axhline(head_chance(task), color="k", linestyle="dashed", linewidth=1, label="chance")
    ax.set_xlabel("round")
    ax.set_ylabel("split-path accuracy")
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="center right")
    ax.set_title(f"Table 1 at {LONG_ROUNDS} rounds ({task}, α̂ = {alpha}): mean over seeds, 95 % band", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return drawn


def sketch_figure(r: Results, path: Path, point, acc, dim: int) -> None:
    """table3.png: left, the uplink's measured reconstruction cosine of each Table 3 row against ρ achieved, with
    the dense-vector cosine for D = `dim` as lines (Y = 1: 1/√(1 + (D − 1)/Z); Y = 3: simulated); right, the
    split-path accuracy against ρ achieved, with the uncompressed Vanilla and chance as levels. The noise
    control stands at the ρ of the sketch whose MSE it carries. Means over seeds, 95 % intervals."""
    import matplotlib.pyplot as plt

    from fedlab.comm.sketch import sketch_for_ratio
    from fedlab.comm.sketch_theory import dense_cosine, one_row_cosine

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for rows, style in ((1, ":"), (3, "--")):
        grid = sorted({sketch_for_ratio(dim, x / 10, 0, rows=rows).cols for x in range(15, 130)}, reverse=True)
        cos = [one_row_cosine(dim, z) if rows == 1 else dense_cosine(dim, rows, z, sketches=16) for z in grid]
        left.plot([dim / (rows * z) for z in grid], cos, "k" + style, linewidth=1,
                  label=f"dense vector, Y = {rows} ({'formula' if rows == 1 else 'simulated'})")
    rows_of = {}                                   # variant (its label) → (ρ achieved, row key), in table order
    for ratio, _, label, key, rows in table3_rows():
        rows_of.setdefault(label, []).append((sketch_for_ratio(dim, float(ratio), 0, rows=rows).ratio, key))
    for i, (label, rows) in enumerate(rows_of.items()):
        for ax, fn, line in ((left, COS, "none"), (right, acc, "-")):
            # side by side where the ρ coincide
            pts = [(x * (1 + 0.02 * (i - 1.5)), v) for x, key in rows if (v := point(key, fn)) is not None]
            if pts:
                ax.errorbar([x for x, _ in pts], [v[0] for _, v in pts], yerr=[v[1] for _, v in pts], marker="o",
                            linestyle=line, capsize=3, color=f"C{i}", label=label)
    vanilla = point("t1/topic/a0.1/vanilla", acc)
    if vanilla:
        right.axhline(vanilla[0], color="C5", linewidth=1, label="Vanilla (ρ = 1, no SS-OP)")
    right.axhline(head_chance("topic"), color="k", linestyle="dashed", linewidth=1, label="chance")
    for ax, ylabel in ((left, "uplink reconstruction cosine"), (right, "split-path accuracy")):
        ax.set_xscale("log")
        ax.set_xticks([2, 3, 4, 6, 8, 12], ["2", "3", "4", "6", "8", "12"])
        ax.minorticks_off()
        ax.set_xlabel("ρ achieved")
        ax.set_ylabel(ylabel)
        ax.set_ylim(0, 1)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    left.set_title("Table 3: the sketch's cosine, measured and by arithmetic (topic, α̂ = 0.1)", fontsize=9)
    right.set_title("Table 3: accuracy against ρ", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
