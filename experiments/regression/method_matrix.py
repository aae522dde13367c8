"""Every registered method on a pico and a tiny setting, on both backends: every round's metrics of each
run (timings left out) as one JSON file — the before/after record of a change that must not move numbers.

    python experiments/regression/method_matrix.py --out before.json            # run the matrix
    python experiments/regression/method_matrix.py --out after.json --compare before.json

`--settings pico` runs only the pico setting (seconds per run; needs the pico zoo), `--backends inprocess`
only one backend, `--methods fedavg,fedmkt` a subset. Differences are listed per run and metric, and so are
differences between the in-process and the Ray run of the same method and setting; the exit status is 1
when any number differs.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

PICO = ["model.name=pico-llama", "federation.rounds=2", "data.train_per_task=24", "data.test_per_task=16",
        "federation.batch_size=8", "model.max_length=64", "data.partition=by_task", "data.num_clients=2",
        "data.tasks=[recall,sentiment]", "data.public_size=16"]
TINY = ["model.name=tiny-llama", "federation.rounds=2", "federation.local_epochs=1", "data.train_per_task=48",
        "data.test_per_task=40", "data.partition=by_task", "data.num_clients=8", "data.public_size=48"]
SLMS = "model.clients=[tiny-gpt2,tiny-opt,tiny-bloom,tiny-qwen2,tiny-gpt2,tiny-opt,tiny-bloom,tiny-qwen2]"
SETTINGS = {"pico": PICO, "tiny": TINY}
RAY = ["backend.name=ray", "backend.num_workers=2", "backend.num_cpus=2"]


def method_extra(setting: str, method: str) -> list[str]:
    """Per-method settings: block counts that fit the model, a public sample size, SLMs for FedMKT."""
    from fedlab import registry

    fields = set(registry.get(method).config_cls.__dataclass_fields__)
    out = []
    if "bi_samples" in fields:
        out.append(f"method.bi_samples={16 if setting == 'pico' else 48}")
    if setting == "pico" and "adapter_front" in fields:
        out += ["method.adapter_front=1", "method.adapter_back=1"]
    if setting == "tiny" and method in ("fedmkt", "llm2slm", "standalone"):
        out.append(SLMS)
    if method in ("llm_fedavg", "llm_fedmoe"):      # proxy tuning: an SLM sharing the LLM's tokenizer
        out += [f"model.name={setting}-llama-s", f"method.llm={setting}-llama"]
    if method == "elsa":                            # split fine-tuning of an encoder, one edge
        out += [f"model.name={setting}-bert", "model.lora.target_modules=[query,value]", "method.num_edges=1",
                "method.warmup_steps=2", "method.probe_size=8"]
    return out


def numbers(history) -> list[dict]:
    rows = [*history.rounds, {"round": "final", **history.final}]
    return [{k: v for k, v in r.items() if isinstance(v, (int, float)) and not k.startswith("time/")
             and "time" not in k.split("/")[-1]} for r in rows]


def run_matrix(settings, backends, methods, out_root: Path, extra: tuple[str, ...] = ()) -> dict:
    from fedlab import registry
    from fedlab.config import load_config
    from fedlab.experiment import run_experiment

    results: dict = {}
    for setting in settings:
        for backend in backends:
            for method in methods or registry.method_names():
                key = f"{setting}/{backend}/{method}"
                overrides = [*SETTINGS[setting], f"method.name={method}", *method_extra(setting, method),
                             *(RAY if backend == "ray" else []), "tracking.enabled=false",
                             f"output_dir={out_root / key}", *extra]
                t0 = time.perf_counter()
                h = run_experiment(load_config(None, overrides), progress=False)
                results[key] = numbers(h)
                print(f"{key}: acc {h.final.get('acc/mean')}  ({time.perf_counter() - t0:.0f}s)", flush=True)
            if backend == "ray":
                import ray

                ray.shutdown()
    return results


def compare(new: dict, old: dict) -> list[str]:
    diffs = []
    for key in sorted(set(new) | set(old)):
        if key not in old or key not in new:
            diffs.append(f"{key}: only in {'new' if key in new else 'old'}")
            continue
        if len(new[key]) != len(old[key]):
            diffs.append(f"{key}: {len(old[key])} rounds -> {len(new[key])}")
        for i, (a, b) in enumerate(zip(new[key], old[key])):
            gone = sorted(set(b) - set(a))
            if gone:
                diffs.append(f"{key} round {b.get('round', i)}: metrics no longer logged {gone}")
            for m in sorted(set(a) & set(b)):
                x, y = a[m], b[m]
                if not (x == y or (isinstance(x, float) and math.isnan(x) and math.isnan(y))):
                    diffs.append(f"{key} round {a.get('round', i)} {m}: {y!r} -> {x!r}")
    return diffs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--compare", default=None)
    ap.add_argument("--settings", default="pico,tiny")
    ap.add_argument("--backends", default="inprocess,ray")
    ap.add_argument("--methods", default=None)
    ap.add_argument("--workdir", default="runs/method_matrix")
    ap.add_argument("overrides", nargs="*", help="key=value for every run (e.g. backend.device=cuda)")
    a = ap.parse_args()
    methods = a.methods.split(",") if a.methods else None
    res = run_matrix(a.settings.split(","), a.backends.split(","), methods, Path(a.workdir), tuple(a.overrides))
    Path(a.out).write_text(json.dumps(res, indent=1, sort_keys=True))
    status = 0
    pairs = {k: k.replace("/inprocess/", "/ray/") for k in res if "/inprocess/" in k}
    across = compare({k: res[k] for k in pairs}, {k: res[v] for k, v in pairs.items() if v in res})
    across = [d for d in across if "only in" not in d]
    print("\n".join(f"in-process vs Ray: {d}" for d in across) if across
          else f"in-process and Ray agree: {sum(v in res for v in pairs.values())} pairs, every round's numbers")
    status |= bool(across)
    if a.compare:
        diffs = compare(res, json.loads(Path(a.compare).read_text()))
        print("\n".join(diffs) if diffs else f"identical to {a.compare}: {len(res)} runs, every round's numbers")
        status |= bool(diffs)
    return int(status)


if __name__ == "__main__":
    sys.exit(main())
