"""ZeroShot: the base model as is — no training, one evaluation."""
