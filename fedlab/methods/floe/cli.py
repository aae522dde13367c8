"""`fedlab profile CONFIG`: Floe's profile table for a config — memory and step latency per LoRA rank on this
machine (cached), the input of Algorithm 1's rank choice. Registered with the CLI by `fedlab.methods.floe`."""
from __future__ import annotations

import sys
from pathlib import Path


def add_arguments(p) -> None:
    p.add_argument("config")
    p.add_argument("overrides", nargs="*")
    p.add_argument("--force", action="store_true", help="measure again and replace the cached profile")
    p.add_argument("--out", default=None, help="also write the profile to this JSON file (for method.profile)")


def run(args) -> int:
    """Floe's profile table for a config: memory and step latency per LoRA rank on this machine (cached)."""
    from fedlab.config import load_config
    from fedlab.methods.floe.profile import measured_profile

    cfg = load_config(args.config, args.overrides)
    ranks = getattr(cfg.method, "ranks", None) or [cfg.model.lora.r]
    scale = getattr(cfg.method, "lora_scale", cfg.model.lora.alpha / cfg.model.lora.r)
    prof = measured_profile(cfg, cfg.model.name, ranks, scale, refresh=args.force,
                            log=lambda m: print(m, file=sys.stderr))
    if args.out:
        Path(args.out).write_text(prof.to_json())
        print(f"wrote {args.out} (pin it with method.profile={args.out})", file=sys.stderr)
    print(f"profile of {cfg.model.name} (batch {cfg.federation.batch_size} × {cfg.model.max_length} tokens, "
          f"{cfg.backend.threads} thread(s)):")
    print("| rank | memory MB | ms / step |\n|---|---|---|")
    for r in prof.ranks:
        print(f"| {r} | {prof.memory(r):.2f} | {1000 * prof.step(r):.2f} |")
    return 0

