"""Floe's privacy detector on the benchmark's labelled privacy prompts (paper §V-F):
precision, recall and F1 of stage 1 alone (patterns and keywords) and of both stages (MiniLM embeddings
against domain centroids, τ chosen on the validation split) — MiniLM's contextual sentence embedding, and
its static one (the mean of its input word embeddings, no transformer layer) — and the latency per prompt on
this machine.

    python experiments/floe/privacy_detector.py            # seeds 0, 1, 2 -> experiments/floe/DETECTOR.md

A seed draws other names, numbers and places into the same templates (validation and test templates are
disjoint); each cell is the mean over seeds ± the half-width of its 95 % t-interval."""
from __future__ import annotations

import json
import platform
import sys
from pathlib import Path

import torch

from fedlab.data.privacy_prompts import privacy_prompts
from fedlab.evidence.page import GENERATED
from fedlab.evidence.stats import fmt_ci
from fedlab.models.zoo import load_encoder
from fedlab.privacy.detector import PrivacyDetector, evaluate_detector

HERE = Path(__file__).resolve().parent
KEYS = ["precision", "recall", "f1", "recall/pattern", "recall/words", "recall/legal", "false_positives",
        "latency_ms_mean", "latency_ms_p95", "stage1_latency_ms_mean", "tau"]


def main(seeds=(0, 1, 2)) -> None:
    encoder, tokenizer = load_encoder("minilm-l6")
    rows = {"stage 1 only": [], "stage 1 + stage 2": [], "stage 1 + stage 2, static embeddings": []}
    for seed in seeds:
        test = privacy_prompts("test", seed=seed)
        rows["stage 1 only"].append(evaluate_detector(PrivacyDetector(), test))
        for name, pooling in (("stage 1 + stage 2", "contextual"), ("stage 1 + stage 2, static embeddings", "static")):
            det = PrivacyDetector.fit(encoder, tokenizer, privacy_prompts("validation", seed=seed), pooling=pooling)
            evaluate_detector(det, test[:5])                   # warm-up: the first forward pass is slower
            rows[name].append(evaluate_detector(det, test))
            print(f"seed {seed}, {name}: " + ", ".join(f"{k} {rows[name][-1][k]:.3f}" for k in KEYS[:3]),
                  file=sys.stderr)
    (HERE / "detector.json").write_text(json.dumps({"seeds": list(seeds), "rows": rows}, indent=1))
    lines = [GENERATED, "# Floe's privacy detector (embedded benchmark)", "",
             f"Produced by `python experiments/floe/privacy_detector.py` (seeds {', '.join(map(str, seeds))}; "
             f"{len(privacy_prompts('test'))} test prompts per seed, half sensitive; {platform.machine()}, "
             f"{torch.get_num_threads()} torch threads). Mean over seeds ± 95 % interval; latencies in ms per prompt, "
             "one prompt at a time.", "",
             "| detector | " + " | ".join(KEYS) + " |", "|---" * (len(KEYS) + 1) + "|"]
    for name, rs in rows.items():
        lines.append(f"| {name} | " + " | ".join(fmt_ci([r[k] for r in rs]) for k in KEYS) + " |")
    (HERE / "DETECTOR.md").write_text("\n".join(lines) + "\n")
    print((HERE / "DETECTOR.md").read_text())


if __name__ == "__main__":
    main()
