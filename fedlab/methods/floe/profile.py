"""The profile table behind Floe's rank selection: memory and step latency of one LoRA
training step per rank, measured on this machine for (model, batch shape, LoRA targets) and cached under
$FEDLAB_HOME/profiles, keyed by everything that built it (the model's weights digest, ranks, batch size,
sequence length, LoRA targets and scale, torch threads, device kind, torch version).

    memory   CUDA: the allocator's peak during the step, minus what was allocated before it.
             CPU:  weights + trainable parameters × 3 (gradient, Adam's two moments) + the activations
                   autograd saves for backward (summed by a saved-tensors hook, each storage once).
    latency  the median wall time of `steps` forward + backward + Adam steps after `warmup` ones.

Both are then made non-decreasing in the rank (isotonic regression); the raw measurements are kept in the
profile's `meta`.

A run records the profile it used (MLflow artifact `floe/floe_profile.json`); a pinned file can be passed
instead of measuring (`method.profile`)."""
from __future__ import annotations

import hashlib
import json
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

PROFILE_VERSION = 2


@dataclass
class Profile:
    ranks: list[int]
    memory_mb: dict[int, float]
    step_s: dict[int, float]
    meta: dict = field(default_factory=dict)

    def memory(self, r: int) -> float:
        return self.memory_mb[int(r)]

    def step(self, r: int) -> float:
        return self.step_s[int(r)]

    def to_json(self) -> str:
        d = asdict(self)
        d["memory_mb"] = {str(k): v for k, v in self.memory_mb.items()}
        d["step_s"] = {str(k): v for k, v in self.step_s.items()}
        return json.dumps(d, indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Profile:
        return cls.from_dict(json.loads(text))

    @classmethod
    def from_dict(cls, d: dict) -> Profile:
        """The profile of a parsed JSON object; a KeyError, TypeError or ValueError when it is not one."""
        return cls([int(r) for r in d["ranks"]], {int(k): float(v) for k, v in d["memory_mb"].items()},
                   {int(k): float(v) for k, v in d["step_s"].items()}, d.get("meta", {}))


def _saved_bytes():
    """A saved-tensors hook pair that sums the bytes of every distinct storage autograd keeps."""
    seen, total = set(), [0]

    def pack(t):
        try:
            ptr = t.untyped_storage().data_ptr()
            if ptr not in seen:
                seen.add(ptr)
                total[0] += t.untyped_storage().nbytes()
        except (RuntimeError, NotImplementedError):
            total[0] += t.numel() * t.element_size()
        return t

    return pack, (lambda t: t), total


def measure_rank(model: torch.nn.Module, trainable: list[str], batch: dict, steps: int, warmup: int) -> tuple[float, float]:
    """(memory MB, median step seconds) of LoRA training steps on `batch`; the model's trainable
    parameters are restored afterwards."""
    params = dict(model.named_parameters())
    train = [params[k] for k in trainable]
    saved = [p.detach().clone() for p in train]
    opt = torch.optim.Adam(train, lr=1e-4)
    cuda = batch["input_ids"].is_cuda
    times, activations = [], 0
    model.train()
    try:
        for i in range(warmup + steps):
            if cuda:
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
                before = torch.cuda.memory_allocated()
            pack, unpack, total = _saved_bytes()
            t0 = time.perf_counter()
            with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
                loss = model(**batch).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            if cuda:
                torch.cuda.synchronize()
            if i >= warmup:
                times.append(time.perf_counter() - t0)
                activations = max(activations, total[0])
                if cuda:
                    activations = max(activations, torch.cuda.max_memory_allocated() - before)
    finally:
        model.eval()
        with torch.no_grad():
            for p, s in zip(train, saved):
                p.copy_(s)
    weights = sum(p.numel() * p.element_size() for p in params.values())
    extra = sum(p.numel() * p.element_size() for p in train) * 3
    return (weights + extra + activations) / 2 ** 20, statistics.median(times)


def _monotone(ranks: list[int], values: dict[int, float]) -> dict[int, float]:
    """The measurements made non-decreasing in the rank (isotonic regression, scikit-learn): a larger rank
    never costs less, but timing noise on a busy machine can invert neighbours. The raw values stay in `meta`."""
    from sklearn.isotonic import IsotonicRegression

    if len(ranks) < 2:
        return dict(values)
    fit = IsotonicRegression(increasing=True).fit_transform(ranks, [values[r] for r in ranks])
    return {r: float(v) for r, v in zip(ranks, fit)}


def profile_key(parts: dict) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:20]


def measured_profile(cfg, model_name: str, ranks, scale: float, steps: int = 9, warmup: int = 2,
                     cache: bool = True, refresh: bool = False, log=None) -> Profile:
    """The profile of `model_name` at `ranks` for this config's batch shape: from the cache, or measured now
    (and cached) when there is none or `refresh` asks for a new measurement."""
    from fedlab.device import resolve_device
    from fedlab.home import fedlab_home
    from fedlab.models.zoo import provenance
    from fedlab.runtime.resident import get_resident
    from fedlab.transforms import transform

    ranks = sorted({int(r) for r in ranks})
    device = resolve_device(cfg.backend.device)
    batch_size, length = cfg.federation.batch_size, cfg.model.max_length
    parts = {"version": PROFILE_VERSION, "model": model_name, "provenance": provenance(model_name),
             "ranks": ranks, "batch_size": batch_size, "max_length": length, "scale": scale,
             "targets": cfg.model.lora.target_modules, "threads": cfg.backend.threads,
             "device": str(device).split(":")[0], "torch": torch.__version__, "steps": steps, "warmup": warmup}
    path = fedlab_home() / "profiles" / f"{profile_key(parts)}.json"
    if cache and path.exists() and not refresh:
        try:
            return Profile.from_json(path.read_text())
        except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as e:
            if log:      # a cache: a damaged entry is measured again, not an error
                log(f"[fedlab] floe profile: the cached profile {path} cannot be read ({type(e).__name__}); "
                    "measuring again")
    threads = torch.get_num_threads()
    torch.set_num_threads(cfg.backend.threads)
    memory, step = {}, {}
    try:
        for r in ranks:
            res = get_resident(cfg, model_name, chain=(transform("lora", r=r, alpha=scale * r),))
            g = torch.Generator().manual_seed(0)
            ids = torch.randint(0, len(res.tokenizer), (batch_size, length), generator=g).to(res.device)
            memory[r], step[r] = measure_rank(res.model, list(res.spec.trainable),
                                              {"input_ids": ids, "labels": ids}, steps, warmup)
            if log:
                log(f"[fedlab] floe profile: {model_name} rank {r}: {memory[r]:.1f} MB, {step[r] * 1000:.1f} ms/step")
    finally:
        torch.set_num_threads(threads)
    raw = {"memory_mb": dict(memory), "step_s": dict(step)}
    memory, step = _monotone(ranks, memory), _monotone(ranks, step)
    prof = Profile(ranks, memory, step, {**parts, "measured": time.strftime("%Y-%m-%d %H:%M:%S"),
                                         "raw": {k: {str(r): v for r, v in d.items()} for k, d in raw.items()}})
    if cache:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(prof.to_json())
        tmp.replace(path)
    return prof


def load_profile(path: str | Path, key: str = "method.profile") -> Profile:
    """The pinned profile at `path` (a config value: relative to the repository root, `fedlab.files`); a
    missing, damaged or misshapen file is one line naming `key`, the file and how to make a good one."""
    from fedlab.files import input_path, problem, read_json

    p = input_path(path)
    fix = "write one with `fedlab profile CONFIG --out FILE`, or set method.profile=null to measure this machine"
    d = read_json(p, key, fix, dict, "a rank profile {ranks, memory_mb, step_s}")
    try:
        prof = Profile.from_dict(d)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        what = f"lacks the field {e.args[0]!r}" if isinstance(e, KeyError) else f"has a bad value ({e})"
        raise problem(key, p, f"is not a rank profile: it {what}", fix) from None
    bad = [r for r in prof.ranks if r not in prof.memory_mb or r not in prof.step_s]
    if bad or not prof.ranks:
        raise problem(key, p, f"is not a rank profile: ranks {bad or '[]'} have no memory_mb / step_s entry", fix)
    return prof
