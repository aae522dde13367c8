"""Objectives: pure penalty kernels, loss terms as modules, and the Client/Server LightningModules."""
from fedlab.objectives.penalties import proximal_penalty

__all__ = ["proximal_penalty"]
