"""ELSA's communication model (paper 002 Eq. 14–15), logged beside the bytes fedlab measures.

  C_g      = (2 ϱ ζ μ D / ρ) · Σ_k Σ_{n∈N_k} B_n  +  K · |θ_LoRA|        bytes in global round g (Eq. 14 as
             printed: the second term counts LoRA parameters, not bytes; `lora_bytes` gives them as ζ·|θ|)
  T_{g,n}  = 2 ϱ B_n μ ζ D / ρ / B_eff                                  seconds of client n's round
  T_total ≈ G · max_n T_{g,n}                                           Eq. 15

ϱ client–edge rounds per global round, ζ bytes per float, μ the sequence length, D the hidden size, ρ the
compression ratio, B_n client n's mean mini-batch size, B_eff the effective bandwidth in bytes/s."""
from __future__ import annotations


def round_bytes(batch_sizes: list[float], rho_steps: int, seq_len: int, hidden: int, ratio: float,
                lora_params: int, num_edges: int, float_bytes: int = 4, lora_bytes: bool = False) -> float:
    """C_g of Eq. 14 over the clients in groups (their mean batch sizes B_n); with `lora_bytes` the edge→cloud
    term is K·ζ·|θ_LoRA| bytes instead of the printed K·|θ_LoRA|."""
    activations = 2 * rho_steps * float_bytes * seq_len * hidden / ratio * sum(batch_sizes)
    return activations + num_edges * lora_params * (float_bytes if lora_bytes else 1)


def client_seconds(batch_size: float, rho_steps: int, seq_len: int, hidden: int, ratio: float,
                   bandwidth_bytes_s: float, float_bytes: int = 4) -> float:
    """T_{g,n}: client n's activation traffic of one global round at the effective bandwidth."""
    return 2 * rho_steps * batch_size * seq_len * float_bytes * hidden / ratio / bandwidth_bytes_s


def total_seconds(global_rounds: int, per_client: list[float]) -> float:
    """Eq. 15: G · max_n T_{g,n}."""
    return global_rounds * max(per_client, default=0.0)


def link_step_bytes(batch: int, seq_len: int, width: int, float_bytes: int = 4) -> tuple[int, int]:
    """(client → edge, edge → client) bytes of one split step as fedlab sends them: each way one activation
    and one gradient of [B, T, width] floats (width = Y·Z sketched, D raw), plus the int8 attention mask
    [B, T] up. Eq. 14's activation term counts the two activation transfers only."""
    act = batch * seq_len * width * float_bytes
    return 2 * act + batch * seq_len, 2 * act


def round_seconds(per_client: list[float], sequential: bool = False) -> float:
    """A round's link time from each client's: max_c t_c when the clients run side by side (under their edges),
    Σ_c t_c when they take one server's θ₂ in turn (Simple SL: the cloud serves one client at a time)."""
    if not per_client:
        return 0.0
    return float(sum(per_client)) if sequential else float(max(per_client))
