"""What the CPU numerics pin costs: a full-parameter training step of the shipped tiny-llama (batch 16 × 64 tokens, AdamW)
timed in fresh processes started pinned (fedlab's default) and native (FEDLAB_NUMERICS=native), alternating,
`--repeats` processes each; prints the median step time of each and the ratio pinned / native with a 95 %
interval over the repeats (the two modes measured side by side in one run, never against a stored number).

    python benchmarks/numerics_pin.py --repeats 5 --steps 12
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

CHILD = r"""
import statistics, sys, time
import fedlab
import torch
from fedlab.models.zoo import load_model
from fedlab import numerics
torch.set_num_threads(int(sys.argv[2]))
model, tok = load_model("tiny-llama")
model.train()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
ids = torch.randint(0, len(tok), (16, 64), generator=torch.Generator().manual_seed(0))
times = []
for i in range(int(sys.argv[1]) + 2):
    t = time.perf_counter()
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward(); opt.step(); opt.zero_grad()
    times.append(time.perf_counter() - t)
print(numerics.capability(), statistics.median(times[2:]))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default=None, help="also write the report as a generated Markdown page")
    args = ap.parse_args()
    from _common import Report

    report = Report("benchmarks/numerics_pin.py")
    runs: dict[str, list[float]] = {"pinned": [], "native": []}
    caps = {}
    for _ in range(args.repeats):
        for mode in runs:
            env = {k: v for k, v in os.environ.items() if k not in ("ATEN_CPU_CAPABILITY", "MKL_CBWR",
                                                                      "ONEDNN_MAX_CPU_ISA")}
            env["FEDLAB_NUMERICS"] = mode
            out = subprocess.run([sys.executable, "-c", CHILD, str(args.steps), str(args.threads)], env=env,
                                 capture_output=True, text=True, check=True).stdout.split()
            caps[mode] = out[0]
            runs[mode].append(float(out[1]))
    from fedlab.evidence.stats import mean_ci

    ratios = [p / n for p, n in zip(runs["pinned"], runs["native"])]
    mean, half = mean_ci(ratios)
    for mode, ts in runs.items():
        report.emit(f"- {mode} ({caps[mode]}): median step {1000 * statistics.median(ts):.1f} ms over {len(ts)} "
                    f"processes ({', '.join(f'{1000 * t:.0f}' for t in ts)} ms)")
    report.emit(f"- pinned / native: {mean:.3f} ± {half:.3f} (95 % interval over {len(ratios)} paired repeats)")
    if args.out:
        report.write(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
