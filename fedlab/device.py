"""The torch device a config's `backend.device` names ("auto": CUDA when there is one)."""
from __future__ import annotations


def resolve_device(device: str) -> str:
    if device == "auto":
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    return device
