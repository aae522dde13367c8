"""Device heterogeneity (Floe): resource-aware rank selection and LoRA factors of different ranks."""
from fedlab.hetero.ranks import aggregate_lora_states, hetero_rank_mean, pad_rank, take_rank, truncate_rank
from fedlab.hetero.select import select_rank

__all__ = ["aggregate_lora_states", "hetero_rank_mean", "pad_rank", "select_rank", "take_rank", "truncate_rank"]
