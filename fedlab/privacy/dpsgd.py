"""Local differential privacy for LoRA clients (Floe).

DP-SGD (the default DP mode): per-example gradients of the trainable parameters come from Opacus'
`GradSampleModule` hooks (a maintained implementation for Linear/Embedding layers, which is what LoRA's A and
B are); each example's gradient is clipped to norm C over all trainable parameters together, the clipped
gradients are summed, Gaussian noise N(0, σ²C²) is added to the sum and the result divided by the batch size:

    g = (Σ_i ∇ℓ_i · min(1, C / ‖∇ℓ_i‖) + N(0, σ²C² I)) / B

with ℓ_i the mean target-token cross-entropy of example i and the batch loss (1/B) Σ_i ℓ_i. The optimiser then
steps on g (AdamW, as without DP; Lightning's own norm clipping is off so the noise is not rescaled).

Update-level DP (a labelled variant): the client's whole update Δ = φ_after − φ_before is clipped to C and
N(0, σ²C²) added once per round (`privatize_update`)."""
from __future__ import annotations

import torch

from fedlab.objectives.modules import ClientModule
from fedlab.objectives.terms import per_sample_target_ce


def clip_and_noise(grad_samples: list[torch.Tensor], clip: float, noise: float,
                   generator: torch.Generator | None = None) -> tuple[list[torch.Tensor], torch.Tensor]:
    """(noisy mean gradient per parameter, per-example norms before clipping) from per-example gradients
    [B, *shape] of each parameter (the DP-SGD step of the module docstring)."""
    b = grad_samples[0].shape[0]
    norms = torch.sqrt(sum(g.reshape(b, -1).float().pow(2).sum(1) for g in grad_samples))
    factor = (clip / (norms + 1e-6)).clamp(max=1.0)
    out = []
    for g in grad_samples:
        summed = torch.einsum("b,b...->...", factor.to(g.dtype), g)
        z = torch.randn(summed.shape, generator=generator, dtype=summed.dtype, device="cpu").to(summed.device)
        out.append((summed + noise * clip * z) / b)
    return out, norms


class DPSGDModule(ClientModule):
    """ClientModule trained with DP-SGD (module docstring). Use `attach()` before the Trainer's fit and
    `detach()` after: the per-example hooks live on the (shared, resident) model only during the fit."""

    def __init__(self, *args, clip: float = 1.0, noise: float = 1.0, seed: int = 0, **kwargs):
        super().__init__(*args, **kwargs)
        if self.terms:
            raise ValueError("DP-SGD: extra loss terms would need their own per-example clipping; none are allowed")
        self.clip, self.noise = float(clip), float(noise)
        self.generator = torch.Generator().manual_seed(int(seed))
        self.last_norms: list[float] = []
        self._gsm = None

    def attach(self) -> None:
        import warnings

        from opacus import GradSampleModule

        # the frozen embeddings need no input gradient; Opacus' full backward hooks say so on every layer
        warnings.filterwarnings("ignore", message="Full backward hook is firing")
        self._gsm = GradSampleModule(self.model, batch_first=True, loss_reduction="mean")

    def detach(self) -> None:
        if self._gsm is not None:
            self._gsm._close()
            self._gsm = None
        for p in self.model.parameters():
            for attr in ("grad_sample", "_forward_counter", "_current_grad_sample"):
                if hasattr(p, attr):
                    delattr(p, attr)

    def compute_loss(self, batch):
        out = self(batch)
        task = per_sample_target_ce(out.logits, batch["labels"]).mean()
        return task, {"task": task, "total": task}

    def on_before_optimizer_step(self, optimizer) -> None:
        params = [self.param_index[k] for k in self.trainable]
        samples = [p.grad_sample for p in params]
        grads, norms = clip_and_noise(samples, self.clip, self.noise, self.generator)
        for p, g in zip(params, grads):
            p.grad = g.to(p.dtype)
            p.grad_sample = None
        self.last_norms = norms.tolist()
        self.log("dp/grad_norm", norms.mean(), on_step=False, on_epoch=True, batch_size=len(norms))
        self.log("dp/clipped", (norms > self.clip).float().mean(), on_step=False, on_epoch=True,
                 batch_size=len(norms))


def privatize_update(new: dict, start: dict, clip: float, noise: float, seed: int) -> tuple[dict, float]:
    """Update-level DP: (start + clip_C(Δ) + N(0, σ²C²), ‖Δ‖ before clipping) with Δ = new − start over all
    keys together."""
    keys = list(new)
    delta = torch.cat([(new[k].float() - start[k].float()).reshape(-1) for k in keys])
    norm = float(delta.norm())
    g = torch.Generator().manual_seed(int(seed))
    noisy = delta * min(1.0, clip / (norm + 1e-12)) + noise * clip * torch.randn(delta.shape, generator=g)
    out, at = {}, 0
    for k in keys:
        n = new[k].numel()
        out[k] = (start[k].float() + noisy[at:at + n].reshape(new[k].shape)).to(new[k].dtype)
        at += n
    return out, norm
