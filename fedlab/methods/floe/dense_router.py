"""LLM-FedMoE's trainable dense router (paper 003 §V, baseline 7: "a router network comprising a dense layer
with trainable parameters … selects the top-3 most significant LoRA modules").

  g(x)  = softmax(W e(x) + b)                  a linear gate on the prompt's embedding e(x) (the router's encoder)
  loss  = −log Σ_j g_j(x) · exp(−NLL_j(x))     the likelihood of a mixture of the M experts' answers, each
                                               expert's summed answer NLL computed once with the expert alone
  ω(x)  = softmax over the top-k of W e(x) + b  (0 elsewhere), then W' = W + Σ_j ω_j s B_j A_j as in Floe

The gate trains on the public samples (Lightning, seeded); the experts stay frozen. Training on the sequence-
level mixture and applying the gate to the weights is our reading (the paper names only the dense layer and
top-3); the README declares it."""
from __future__ import annotations

import lightning as L
import torch
from torch import nn

from fedlab.methods.floe.router import example_nll, top_k_gates


def mixture_nll(gate_logits: torch.Tensor, expert_nll: torch.Tensor) -> torch.Tensor:
    """Mean over rows of −log Σ_j softmax(gate_logits)_j · exp(−expert_nll_j) (both [N, M])."""
    return -torch.logsumexp(torch.log_softmax(gate_logits.float(), dim=-1) - expert_nll.float(), dim=-1).mean()


class DenseGate(L.LightningModule):
    def __init__(self, dim: int, experts: int, lr: float = 0.05):
        super().__init__()
        self.linear = nn.Linear(dim, experts)
        nn.init.zeros_(self.linear.weight)
        nn.init.zeros_(self.linear.bias)        # starts as the uniform mixture
        self.lr = lr

    def forward(self, e: torch.Tensor) -> torch.Tensor:
        return self.linear(e)

    def training_step(self, batch, batch_idx):
        e, nll = batch
        loss = mixture_nll(self(e), nll)
        self.log("router/mixture_nll", loss, prog_bar=False)
        return loss

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.lr)


def expert_nll_table(resident, centres: list[dict], examples, max_length: int) -> torch.Tensor:
    """[N, M]: each public example's summed answer NLL under each expert alone."""
    from fedlab.transforms import set_state

    cols = []
    for c in centres:
        set_state(resident.model, c)
        cols.append(example_nll(resident.model, resident.tokenizer, examples, max_length))
    return torch.stack(cols, dim=1)


def train_dense_gate(cfg, embeddings: torch.Tensor, nll: torch.Tensor, lr: float, epochs: int) -> DenseGate:
    """Fit the gate on (prompt embedding, per-expert NLL) rows, seeded, with fedlab's Trainer settings."""
    from fedlab.objectives.training import make_trainer
    from fedlab.seeding import seed_everything

    seed_everything(cfg.seed)
    gate = DenseGate(embeddings.shape[-1], nll.shape[-1], lr)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(embeddings.float(), nll.float()),
                                         batch_size=32, shuffle=True,
                                         generator=torch.Generator().manual_seed(cfg.seed))
    make_trainer(cfg, max_epochs=epochs, max_steps=0).fit(gate, loader)
    return gate.cpu().eval()      # a [D, E] linear map: scored on the CPU, where the prompt embeddings are


def dense_gates(gate: DenseGate, embeddings: torch.Tensor, k: int | None) -> torch.Tensor:
    """The top-k gates of each prompt, on the CPU (the gate stays where its Trainer left it: on a GPU run, the
    GPU)."""
    device = next(gate.parameters()).device
    with torch.no_grad():
        return top_k_gates(gate(embeddings.float().to(device)), k).cpu()
