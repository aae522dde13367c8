"""A system's claims in one picture: per claim, the measured difference's 95 % interval, the paper's effect and
the band of effects its seeds could not detect (± MDE around 0), coloured by verdict."""
from __future__ import annotations

import math
from pathlib import Path

from fedlab.evidence import verdicts as V

COLOURS = {V.REPRODUCED: "#1a7f37", V.SMALLER: "#9a6700", V.LARGER: "#0969da", V.CONTRADICTED: "#cf222e",
           V.UNDERPOWERED: "#8c959f", V.INCONCLUSIVE: "#6e7781", V.NO_CONTROL: "#bf8700",
           V.TOO_FEW_SEEDS: "#afb8c1", V.STALE: "#afb8c1"}


def _short(text: str, width: int = 78) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def forest_plot(assessed, path: Path, title: str) -> Path | None:
    """Draw the assessments (`claims.Assessment`) that have a difference into `path` (PNG); None when none has."""
    rows = [a for a in assessed if a.diff is not None and math.isfinite(a.diff["half"])]
    if not rows:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    height = 1.2 + 0.3 * len(rows)
    fig, ax = plt.subplots(figsize=(11, height))
    for i, a in enumerate(rows):
        y = len(rows) - 1 - i
        d, colour = a.diff, COLOURS.get(a.verdict.word, "#57606a")
        if math.isfinite(d["mde"]):
            ax.fill_betweenx([y - 0.35, y + 0.35], -d["mde"], d["mde"], color="#d0d7de", alpha=0.5, linewidth=0)
        ax.plot([d["mean"] - d["half"], d["mean"] + d["half"]], [y, y], color=colour, linewidth=2.2)
        ax.plot([d["mean"]], [y], "o", color=colour, markersize=5)
        p = a.claim.paper_effect()
        if p is not None:
            ax.plot([p], [y], "D", markerfacecolor="white", markeredgecolor="black", markersize=5)
        if a.claim.at_least:
            ax.plot([-a.claim.tolerance], [y], "|", color="black", markersize=11)
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([_short(f"{a.claim.claim} [{a.verdict.word}]") for a in reversed(rows)], fontsize=7)
    ax.set_xlabel("a − b, points (95 % interval over seeds; grey band: ± MDE at 80 % power)")
    ax.set_title(title, fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    handles = [Line2D([], [], color=c, linewidth=2.2, label=w) for w, c in COLOURS.items()
               if any(a.verdict.word == w for a in rows)]
    handles.append(Line2D([], [], marker="D", linestyle="", markerfacecolor="white", markeredgecolor="black",
                          label="paper's effect"))
    if any(a.claim.at_least for a in rows):
        handles.append(Line2D([], [], marker="|", linestyle="", color="black", markersize=11,
                              label="−tolerance (comparable claims)"))
    ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
