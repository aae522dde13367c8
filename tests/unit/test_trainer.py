"""The Trainer every fit uses (`fedlab.objectives.training.make_trainer`): built once per client per round, so what
it costs to build is paid by every simulated client."""
import importlib.metadata

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
