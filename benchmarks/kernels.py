"""Aggregation kernels against the memory-bandwidth floor and a per-tensor implementation.

For K clients and P parameters it times fedlab's `h_ties`, `ties` (fused by torch.compile from P = 2^23 where
compiling works, `fedlab/aggregators/fused.py`; `h_ties_eager` / `ties_eager`: the eager block loop beside
them; the first call's compile is outside the timing), `conflict_scores`, `pairwise_cosine` on a
[K, P] float32 update matrix, a plain copy of the same K·P floats (the floor: any kernel must read them
once), and a straightforward per-tensor implementation of each kernel over the same numbers split into
LoRA-sized tensors (131,072 entries: r = 32 × 4096), as code that loops over a state dict would do.

    python benchmarks/kernels.py                      # K ∈ {4, 8, 16}, P ∈ {1M, 10M, 76M}
    python benchmarks/kernels.py --ks 8 --sizes 10M   # the target point: h_ties ≤ 2.5×, ties ≤ 2× the copy
    python benchmarks/kernels.py --device cuda --no-per-tensor   # on a GPU, against a device-to-device copy

PEFT's `merge_utils.ties` (per tensor, as PEFT merges adapters) is timed beside fedlab's `ties` when peft
is installed.

Prints per (kernel, K, P): seconds, ratio to the copy, and the per-tensor implementation's time and
its slowdown against fedlab's. Needs ~3.5 × K·P × 4 bytes of RAM at the largest point (skipped if not).
"""
from __future__ import annotations

import argparse
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import best_time, table  # noqa: E402

from fedlab import compiled  # noqa: E402
from fedlab.aggregators import (  # noqa: E402
    basic,
    conflict_scores,
    consensus_weights,
    h_ties,
    heterogeneity,
    pairwise_cosine,
    ties,
    vectorised,
)

CHUNK = 32 * 4096


# ----------------------------------------------------------------------------- per-tensor baselines
def pt_pairwise_cosine(chunks):
    k = chunks[0].shape[0]
    gram = torch.zeros(k, k)
    for c in chunks:                                  # one tensor of the state dict at a time
        for i in range(k):
            for j in range(i, k):
                gram[i, j] += torch.dot(c[i], c[j])
    gram = gram + gram.triu(1).T
    n = gram.diag().sqrt().clamp(min=1e-30)
    return gram / (n[:, None] * n[None, :])


def pt_conflict_scores(chunks):
    return torch.cat([1.0 - torch.sign(c).sum(0).abs() / c.shape[0] for c in chunks])


def _pt_trim(c, keep):
    # per tensor and client: keep the ceil(keep·n) largest magnitudes of this tensor (topk + scatter)
    out = torch.zeros_like(c)
    for i in range(c.shape[0]):
        n = max(1, int(keep[i] * c.shape[1] + 0.999999))
        idx = c[i].abs().topk(n).indices
        out[i, idx] = c[i, idx]
    return out


def pt_ties(chunks, density=0.2):
    out = []
    for c in chunks:
        t = _pt_trim(c, [density] * c.shape[0])
        elected = torch.where(t.sum(0) >= 0, 1.0, -1.0)
        agree = (t != 0) & (torch.sign(t) == elected)
        den = agree.sum(0)
        out.append(torch.where(den > 0, (t * agree).sum(0) / den.clamp(min=1), torch.zeros(c.shape[1])))
    return torch.cat(out)


def pt_h_ties(chunks, r0=1.0, delta=0.2, rho=1.1, eps=1e-8):
    sim = pt_pairwise_cosine(chunks)
    _, h_norm = heterogeneity(sim)
    w = consensus_weights(sim)
    r = (r0 - delta * h_norm).clamp(0, 1).tolist()
    out = []
    for c in chunks:
        t = w[:, None] * _pt_trim(c, r)
        pos, neg = t > 0, t < 0
        pm, nm = (t * pos).sum(0), -(t * neg).sum(0)
        pw = pm / (nm + eps) >= rho
        nw = ~pw & (nm / (pm + eps) >= rho)
        wp = (w[:, None] * pos).sum(0).clamp(min=1e-30)
        wn = (w[:, None] * neg).sum(0).clamp(min=1e-30)
        out.append(torch.where(pw, (t * pos).sum(0) / wp, torch.where(nw, (t * neg).sum(0) / wn, torch.zeros_like(pm))))
    return torch.cat(out)


def peft_ties(chunks, density=0.2):
    """PEFT's TIES (`peft.utils.merge_utils.ties`) over the same numbers, one LoRA-sized tensor at a time."""
    from peft.utils.merge_utils import ties as _ties

    k = chunks[0].shape[0]
    w = torch.ones(k, device=chunks[0].device)
    return torch.cat([_ties(list(c), w, density) for c in chunks])


def eager(kernel, tau):
    """`kernel(tau)` with the fused path off, the process's choice restored after."""
    before = compiled.mode()
    compiled.set_mode("off")
    try:
        return kernel(tau)
    finally:
        compiled.set_mode(before)


def bench_point(k: int, p: int, rep: int, per_tensor: bool, names: list[str], device: str = "cpu") -> list[list]:
    tau = torch.randn(k, p, generator=torch.Generator().manual_seed(0)).to(device)
    sync = torch.cuda.synchronize if device.startswith("cuda") else None
    copy = best_time(lambda: tau.clone(), rep, sync=sync)
    chunks = list(tau.split(CHUNK, dim=1))
    kernels = {"h_ties": (lambda: h_ties(tau), lambda: pt_h_ties(chunks)),
               "ties": (lambda: ties(tau), lambda: pt_ties(chunks)),
               # the eager block loop, with the fused path (fedlab.aggregators.fused) switched off for the call
               "h_ties_eager": (lambda: eager(h_ties, tau), None),
               "ties_eager": (lambda: eager(ties, tau), None),
               "peft_ties": (lambda: peft_ties(chunks), None),
               # the trimming threshold alone (a fifth of each row kept): by counting passes where compiling
               # works and P ≥ 2^23 (fedlab.aggregators.counting), and by the block loop's sampled bracket
               "selection": (lambda: basic.row_thresholds(tau, [math.ceil(0.2 * p)] * k), None),
               "selection_blocked": (lambda: basic._thresholds(tau, [math.ceil(0.2 * p)] * k, 1 << 17), None),
               "conflict_scores": (lambda: conflict_scores(tau), lambda: pt_conflict_scores(chunks)),
               "pairwise_cosine": (lambda: pairwise_cosine(tau), lambda: pt_pairwise_cosine(chunks))}
    rows = []
    for name, (ours, base) in kernels.items():
        if name not in names:
            continue
        if name == "peft_ties":
            try:
                import peft  # noqa: F401
            except ImportError:
                continue
        t = best_time(ours, rep, sync=sync)
        tb = best_time(base, 1, warmup=0, sync=sync) if per_tensor and base is not None else None
        rows.append([name, str(k), f"{p / 1e6:g}M", t, copy, t / copy, "-" if tb is None else tb,
                     "-" if tb is None else tb / t])
        print(f"{name:16s} K={k:2d} P={p / 1e6:5g}M  {t:8.4f}s  {t / copy:6.2f}× copy", file=sys.stderr, flush=True)
    return rows


def profile(p: int, k: int, device: str) -> None:
    """Where one h_ties and one ties call spend their time: torch.profiler's operators, by device time."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    tau = torch.randn(k, p, generator=torch.Generator().manual_seed(0)).to(device)
    h_ties(tau), ties(tau)                                   # warm-up
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.startswith("cuda") else [])
    for name, fn in (("h_ties", h_ties), ("ties", ties)):
        with torch_profile(activities=acts) as prof:
            fn(tau)
            if device.startswith("cuda"):
                torch.cuda.synchronize()
        key = "device_time_total" if device.startswith("cuda") else "cpu_time_total"
        print(f"profile of {name}, K={k}, P={p:,}, {device}:")
        print(prof.key_averages().table(sort_by=key, row_limit=18, max_name_column_width=40))


def parse_size(s: str) -> int:
    s = s.upper()
    return int(float(s[:-1]) * 1_000_000) if s.endswith("M") else int(s)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ks", default="4,8,16")
    ap.add_argument("--sizes", default="1M,10M,76M")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--no-per-tensor", action="store_true", help="skip the (slow) per-tensor baselines")
    ap.add_argument("--kernels", default="h_ties,ties,h_ties_eager,ties_eager,peft_ties,selection,selection_blocked,"
                                         "conflict_scores,pairwise_cosine")
    ap.add_argument("--device", default="cpu", help="cpu or cuda (the copy is then device to device)")
    ap.add_argument("--path", choices=("auto", "blocked", "vectorised"), default="auto",
                    help="the trimming kernels' path: auto (blocked on the CPU, vectorised elsewhere) or forced")
    ap.add_argument("--compile", action="store_true", help="time fedlab's kernels wrapped in torch.compile")
    ap.add_argument("--profile", action="store_true",
                    help="print torch.profiler's operators of one h_ties and one ties call at the first point")
    args = ap.parse_args()
    vectorised.FORCE = {"auto": None, "blocked": False, "vectorised": True}[args.path]
    if args.path != "auto" or args.compile:   # a named path (or the whole kernel compiled) is timed as such
        compiled.set_mode("off")
    if args.compile:
        global h_ties, ties, conflict_scores
        h_ties, ties, conflict_scores = (torch.compile(f) for f in (h_ties, ties, conflict_scores))
    if args.threads:
        torch.set_num_threads(args.threads)
    import psutil

    if args.profile:
        profile(parse_size(args.sizes.split(",")[0]), int(args.ks.split(",")[0]), args.device)
    rows = []
    for p in [parse_size(x) for x in args.sizes.split(",")]:
        for k in [int(x) for x in args.ks.split(",")]:
            need = 3.5 * k * p * 4
            free = (torch.cuda.mem_get_info()[0] if args.device.startswith("cuda")
                    else psutil.virtual_memory().available)
            if need > free:
                print(f"skipping K={k}, P={p:,}: needs ~{need / 2**30:.1f} GiB", file=sys.stderr)
                continue
            rep = args.repeat if k * p <= 200_000_000 or args.device != "cpu" else 1
            rows += bench_point(k, p, rep, not args.no_per_tensor, args.kernels.split(","), args.device)
    print(table(rows, ["kernel", "K", "P", "fedlab s", "copy s", "× copy", "per-tensor s", "per-tensor / fedlab"]))
    for name, goal in (("h_ties", 2.5), ("ties", 2), ("peft_ties", None)):
        hit = [r for r in rows if r[0] == name and r[1] == "8" and r[2] == "10M"]
        if hit:
            verdict = f"goal ≤ {goal}×: {'met' if hit[0][5] <= goal else 'not met'}" if goal else "baseline"
            print(f"{'target' if goal else '      '}: {name} at K=8, P=10M = {hit[0][5]:.2f}× the copy of K·P floats "
                  f"({verdict})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
