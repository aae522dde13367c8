"""The Trainer every fit uses (`fedlab.objectives.training.make_trainer`): built once per client per round, so what
it costs to build is paid by every simulated client."""
import importlib.metadata

import pytest

from fedlab.config import load_config
from fedlab.objectives import training


def test_building_trainers_reads_the_installed_callback_factories_once(monkeypatch):
    cfg = load_config(None, ["backend.device=cpu"])
    calls = []
    real = importlib.metadata.entry_points

    def counting(**kw):
        calls.append(kw)
        return real(**kw)
    monkeypatch.setattr(importlib.metadata, "entry_points", counting)
    training._callback_factories.cache_clear()
    first = training.make_trainer(cfg)
    second = training.make_trainer(cfg)
    assert calls == [{"group": "lightning.pytorch.callbacks_factory"}]     # one scan, not one per Trainer
    assert first is not second and first.callbacks is not second.callbacks
    training._callback_factories.cache_clear()


class _LoggedByLightning:
    """A ClientModule whose losses go through `self.log(..., on_epoch=True)`, as every fit logged them before the
    module kept its own sums: the reference the kept sums must match bit for bit."""

    def log_losses(self, parts, batch_size):
        for name, value in parts.items():
            self.log(f"loss/{name}", value.detach(), on_step=False, on_epoch=True, batch_size=batch_size,
                     sync_dist=True)


@pytest.mark.parametrize("budget", [{"max_steps": 1}, {"max_steps": 5}, {"max_epochs": 2}],
                         ids=["one step", "steps across epochs", "two epochs"])
def test_a_fits_losses_are_lightnings_epoch_means_bit_for_bit(pico_zoo, budget):
    import torch
    from torch.utils.data import DataLoader

    from conftest import PICO
    from fedlab.data.collate import PadCollator
    from fedlab.objectives.modules import ClientModule, Weighted, fit_metrics
    from fedlab.objectives.terms import ProximalTerm
    from fedlab.runtime.host import ClientHost
    from fedlab.transforms import get_state, set_state
    from fedlab.transforms.lora import flatten_state

    cfg = load_config(None, PICO + ["data.num_clients=1", "data.partition=iid", "data.tasks=[recall,sentiment]", "data.train_per_task=7",
                                    "backend.device=cpu"])
    client = ClientHost(cfg, [0]).clients[0]
    res = client.resident
    ds = client.dataset("own", client.train_examples(None))    # 14 rows: batches of 4, 4, 4, 2
    legacy = type("Legacy", (_LoggedByLightning, ClientModule), {})
    out = []
    for cls in (ClientModule, legacy):
        set_state(res.model, res.init_state)
        torch.manual_seed(0)
        loader = DataLoader(ds, batch_size=4, shuffle=True, generator=torch.Generator().manual_seed(1),
                            collate_fn=PadCollator(res.tokenizer.pad_token_id))
        module = cls(res.model, res.spec.trainable, [Weighted(1.0, ProximalTerm(res.spec.trainable, flatten_state(res.init_state, res.spec.trainable), 0.1))], lr=1e-2)
        res.model.train()
        training.make_trainer(cfg, **budget).fit(module, loader)
        res.model.eval()
        out.append((fit_metrics(module), get_state(res.model, res.spec.communicated)))
    (kept, state), (logged, state_ref) = out
    assert set(kept) == {"loss/task", "loss/proximal", "loss/total"} and kept == logged
    assert all(torch.equal(state[k], state_ref[k]) for k in state)
