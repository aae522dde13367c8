"""Objectives: pure penalty kernels, loss terms as modules, and the Client/Server LightningModules."""
from fedlab.objectives.penalties import pcr_penalty, proximal_penalty

__all__ = ["pcr_penalty", "proximal_penalty"]
