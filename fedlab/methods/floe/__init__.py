"""Floe: resource-aware LoRA ranks on simulated edge devices, clustered aggregation of heterogeneous-rank
updates into an expert pool (paper 003)."""
from fedlab.methods.floe.config import FloeConfig, FloeNoClusterConfig, FloeNoRankConfig, LLMFedMoEConfig
from fedlab.registry import register_command, register_method

for _cfg in (FloeConfig, FloeNoRankConfig, FloeNoClusterConfig, LLMFedMoEConfig):
    register_method(_cfg.name, _cfg, "fedlab.methods.floe.method:Floe", "fedlab.methods.floe.client:FloeClient")

register_command("profile", "Floe: measure (or show the cached) memory and step latency per LoRA rank",
                 "fedlab.methods.floe.cli:add_arguments", "fedlab.methods.floe.cli:run")
