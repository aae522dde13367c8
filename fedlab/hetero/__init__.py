"""Kernels for heterogeneous devices: resource-aware rank selection (Floe Algorithm 1) and LoRA factors of
different ranks. Floe's simulated device classes and profiles are in `fedlab.methods.floe`."""
from fedlab.hetero.ranks import aggregate_lora_states, hetero_rank_mean, pad_rank, take_rank, truncate_rank
from fedlab.hetero.select import select_rank

__all__ = ["aggregate_lora_states", "hetero_rank_mean", "pad_rank", "select_rank", "take_rank", "truncate_rank"]
