"""Plots logged as artifacts: accuracy per round per client."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def _save(fig, path: str | Path, dpi: int = 100) -> Path:
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path


def accuracy_per_round(history_rounds: list[dict], path: str | Path, title: str = "",
                       labels: dict | None = None) -> Path:
    """Accuracy of every client and their mean per round; `labels` names clients (e.g. by their tasks)."""
    fig, ax = plt.subplots(figsize=(7, 4.2))
    keys = sorted({k for r in history_rounds for k in r if k.startswith("acc/client_")},
                  key=lambda k: int(k.rsplit("_", 1)[1]))
    for k in keys:
        pts = [(r["round"], r[k]) for r in history_rounds if k in r]
        cid = int(k.rsplit("_", 1)[1])
        name = k.split("/")[1] + (f" ({labels[cid]})" if labels and cid in labels else "")
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=".", alpha=0.6, label=name)
    pts = [(r["round"], r["acc/mean"]) for r in history_rounds if "acc/mean" in r]
    ax.plot([p[0] for p in pts], [p[1] for p in pts], color="black", linewidth=2.5, marker="o", label="mean")
    ax.set_xlabel("round (0 = zero-shot)")
    ax.set_ylabel("accuracy")
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    ax.set_title(title)
    ax.legend(fontsize=7, ncol=2, loc="lower right")
    return _save(fig, path, dpi=110)


def similarity_heatmap(sim, path: str | Path, title: str = "") -> Path:
    """The K×K cosine similarity of client updates."""
    fig, ax = plt.subplots(figsize=(4.6, 4))
    im = ax.imshow(sim, vmin=-1, vmax=1, cmap="RdBu_r")
    k = len(sim)
    ax.set_xticks(range(k))
    ax.set_yticks(range(k))
    for i in range(k):
        for j in range(k):
            ax.text(j, i, f"{float(sim[i][j]):.2f}", ha="center", va="center", fontsize=7)
    fig.colorbar(im, ax=ax, fraction=0.046)
    ax.set_title(title or "client update cosine similarity")
    return _save(fig, path)


def conflict_histogram(conflict, path: str | Path, title: str = "") -> Path:
    """Distribution of the per-parameter conflict scores C_d."""
    fig, ax = plt.subplots(figsize=(5, 3.2))
    ax.hist(conflict, bins=20, range=(0, 1), color="#b5523b")
    ax.set_xlabel("conflict score C_d")
    ax.set_ylabel("parameters")
    ax.set_title(title or "conflict scores")
    return _save(fig, path)


def rank_heatmap(ranks: dict[int, dict[int, int]], num_clients: int, path: str | Path, labels: dict[int, str],
                 title: str = "") -> Path:
    """Clients × rounds: the LoRA rank each client trained at (blank: sat out), for Floe."""
    import numpy as np

    rounds = sorted(ranks)
    grid = np.full((num_clients, len(rounds)), np.nan)
    for j, r in enumerate(rounds):
        for c, rank in ranks[r].items():
            if rank:
                grid[c, j] = rank
    fig, ax = plt.subplots(figsize=(1.2 + 0.5 * len(rounds), 1.2 + 0.3 * num_clients))
    im = ax.imshow(np.log2(grid), cmap="viridis", aspect="auto")
    for c in range(num_clients):
        for j in range(len(rounds)):
            if not np.isnan(grid[c, j]):
                ax.text(j, c, f"{int(grid[c, j])}", ha="center", va="center", fontsize=7, color="white")
    ax.set_xticks(range(len(rounds)), [str(r) for r in rounds])
    ax.set_yticks(range(num_clients), [f"{c} {labels.get(c, '')}" for c in range(num_clients)], fontsize=7)
    ax.set_xlabel("round")
    fig.colorbar(im, ax=ax, fraction=0.046, label="log2 rank")
    ax.set_title(title or "LoRA rank per client (blank: sat out)")
    return _save(fig, path)


def fusion_weights(ws: list[float], path: str | Path, title: str = "") -> Path:
    """Floe's Fig. 13: the distribution of the per-token fusion weight w (1 = the SLM alone)."""
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    ax.hist(ws, bins=20, range=(0, 1), color="tab:blue", alpha=0.8)
    if ws:
        mean = sum(ws) / len(ws)
        ax.axvline(mean, color="black", linestyle="--", label=f"mean w = {mean:.3f}")
        ax.legend(fontsize=8)
    ax.set_xlabel("w (weight of the SLM's distribution)")
    ax.set_ylabel("tokens")
    ax.set_title(title or "fusion weight per generated or scored token")
    return _save(fig, path)


def latency_vs_rtt(curve: list[dict], tau_wait_ms: float, path: str | Path, default_rtt_ms: float | None = None) -> Path:
    """Floe's Fig. 16: latency per token against the simulated round-trip time, with the τ_wait fallback and
    waiting for the LLM, and the share of LLM answers that miss τ_wait (right axis)."""
    fig, ax = plt.subplots(figsize=(6.5, 4))
    x = [c["rtt_ms"] for c in curve]
    ax.plot(x, [c["wait_ms"] for c in curve], marker=".", color="tab:red", label="wait for the LLM")
    ax.plot(x, [c["latency_ms"] for c in curve], marker="o", color="tab:blue", label="fallback at τ_wait")
    ax.axhline(tau_wait_ms, color="grey", linestyle=":", label=f"τ_wait = {tau_wait_ms:.0f} ms")
    if default_rtt_ms is not None:
        ax.axvline(default_rtt_ms, color="black", linestyle="--", linewidth=0.8, label="the run's RTT")
    ax.set_xlabel("simulated round-trip time (ms)")
    ax.set_ylabel("latency per token (ms)")
    ax.grid(alpha=0.3)
    ax2 = ax.twinx()
    ax2.plot(x, [c["fallback_share"] for c in curve], color="tab:green", linestyle="--", label="fallback share")
    ax2.set_ylim(0, 1.05)
    ax2.set_ylabel("share of LLM answers past τ_wait")
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    ax.legend(h1 + h2, l1 + l2, fontsize=7, loc="upper left")
    return _save(fig, path)


def line_with_intervals(points: list[tuple[str, float, float, float]], path: str | Path, xlabel: str, ylabel: str,
                        title: str = "") -> Path:
    """One line per series from (series, x, mean, 95 % half-width) points, with error bars."""
    fig, ax = plt.subplots(figsize=(6, 4))
    for name in dict.fromkeys(p[0] for p in points):
        pts = sorted((x, m, h) for n, x, m, h in points if n == name)
        ax.errorbar([p[0] for p in pts], [p[1] for p in pts], yerr=[p[2] for p in pts], marker="o", capsize=3,
                    label=name)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.set_title(title)
    ax.legend(fontsize=8)
    return _save(fig, path)


def bars_with_intervals(bars: list[tuple[str, str, float, float]], path: str | Path, ylabel: str,
                        title: str = "") -> Path:
    """Grouped bars from (series, group, mean, 95 % half-width), one group per x position."""
    series = list(dict.fromkeys(b[0] for b in bars))
    groups = list(dict.fromkeys(b[1] for b in bars))
    width = 0.8 / max(len(series), 1)
    fig, ax = plt.subplots(figsize=(1.6 * len(groups) + 2, 4))
    for i, name in enumerate(series):
        vals = {g: (m, h) for n, g, m, h in bars if n == name}
        xs = [j + (i - (len(series) - 1) / 2) * width for j, g in enumerate(groups) if g in vals]
        ax.bar(xs, [vals[g][0] for g in groups if g in vals], width, yerr=[vals[g][1] for g in groups if g in vals],
               capsize=2, label=name)
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(groups)
    ax.set_ylabel(ylabel)
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3, axis="y")
    ax.set_title(title)
    ax.legend(fontsize=7)
    return _save(fig, path)


def elsa_topology(clients, edges, groups: dict[int, list[int]], excluded: dict[int, str], trust, path: str | Path,
                  mislabeled=(), title: str = "") -> Path:
    """ELSA's placement: clients (colour = their edge's group, size = relative trust; × excluded, ringed when
    mislabeled) and edges (squares), a line from each member to its edge."""
    fig, ax = plt.subplots(figsize=(5.6, 5.2))
    colours = plt.get_cmap("tab10")
    edge_of = {c: k for k, members in groups.items() for c in members}
    for c, (x, y) in enumerate(clients):
        if c in edge_of:
            k = edge_of[c]
            ex, ey = edges[k]
            ax.plot([x, ex], [y, ey], color=colours(k % 10), alpha=0.35, linewidth=1)
            ax.scatter([x], [y], s=30 + 120 * float(trust[c]), color=colours(k % 10), zorder=3)
        else:
            ax.scatter([x], [y], marker="x", s=60, color="grey", zorder=3)
        if c in mislabeled:
            ax.scatter([x], [y], s=220, facecolors="none", edgecolors="red", linewidths=1.2, zorder=4)
        ax.annotate(str(c), (x, y), fontsize=6, xytext=(3, 3), textcoords="offset points")
    for k, (x, y) in enumerate(edges):
        ax.scatter([x], [y], marker="s", s=140, color=colours(k % 10), edgecolors="black", zorder=5)
        ax.annotate(f"edge {k}", (x, y), fontsize=7, xytext=(4, -10), textcoords="offset points")
    ax.set_xlabel("km")
    ax.set_ylabel("km")
    ax.set_aspect("equal")
    ax.grid(alpha=0.3)
    ax.set_title(title or f"ELSA topology: {len(groups)} groups, {len(excluded)} excluded (×), red ring = mislabeled")
    return _save(fig, path, dpi=110)
