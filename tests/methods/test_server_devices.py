"""backend.server_devices: the server's fit data-parallel over spawned processes gives the one-device weights
(fedlab/objectives/server_fit.py), and each process reads its own part of the one-device batches."""
from __future__ import annotations

import pytest
import torch

from fedlab.config import ConfigError, load_config
from fedlab.objectives.server_devices import check_server_devices
from fedlab.objectives.server_fit import RankSlice, fit_shuffled


def _cfg(devices: int, batch: int = 8):
    return load_config(None, ["backend.device=cpu", f"backend.server_devices={devices}",
                              f"federation.batch_size={batch}", "federation.lr=0.01"])


def test_rank_slices_partition_each_one_device_batch_by_hand(monkeypatch):
    # n = 10, B = 4, W = 2: batches perm[0:4], perm[4:8], perm[8:10]; rank r takes the r-th half of each
    perm = torch.randperm(10, generator=torch.Generator().manual_seed(3)).tolist()   # RandomSampler's first pass
    monkeypatch.setattr(torch.distributed, "is_initialized", lambda: True)
    got = {}
    for rank in (0, 1):
        monkeypatch.setattr(torch.distributed, "get_rank", lambda rank=rank: rank)
        s = RankSlice(10, 4, 2, torch.Generator().manual_seed(3))
        got[rank] = list(s)
        assert len(s) == len(got[rank]) == 5
    assert got[0] == perm[0:2] + perm[4:6] + perm[8:9]
    assert got[1] == perm[2:4] + perm[6:8] + perm[9:10]


def test_short_last_batch_is_padded_with_its_own_first_index(monkeypatch):
    perm = torch.randperm(7, generator=torch.Generator().manual_seed(3)).tolist()
    monkeypatch.setattr(torch.distributed, "is_initialized", lambda: True)
    parts = []
    for rank in (0, 1):
        monkeypatch.setattr(torch.distributed, "get_rank", lambda rank=rank: rank)
        parts.append(list(RankSlice(7, 4, 2, torch.Generator().manual_seed(3))))
    assert parts[0] == perm[0:2] + perm[4:6] and parts[1] == perm[2:4] + [perm[6], perm[4]]


def test_server_devices_needs_a_batch_that_splits():
    with pytest.raises(ConfigError, match=r"backend.server_devices=3: federation.batch_size=8"):
        check_server_devices(_cfg(3))
    with pytest.raises(ConfigError, match=r"backend\.server_devices"):
        _cfg(0)
    check_server_devices(_cfg(2))


def _tiny_llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                        num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=16))


def _fit(devices: int, batch: int, metrics: dict | None = None) -> dict:
    from fedlab.data.collate import PadCollator
    from fedlab.objectives.modules import ServerModule

    g = torch.Generator().manual_seed(1)
    # 16 examples of 8 tokens, the last 4 of each the target: every example has the same number of target
    # tokens, so the mean over a part's tokens is the mean over its examples (the module docstring's condition)
    items = []
    for _ in range(16):
        ids = torch.randint(1, 32, (8,), generator=g).tolist()
        items.append({"input_ids": ids, "labels": [-100] * 4 + ids[4:]})
    model = _tiny_llama()
    names = tuple(n for n, _ in model.named_parameters())
    module = ServerModule(model, names, lr=0.01)
    model.train()
    out = fit_shuffled(_cfg(devices, batch), module, items, PadCollator(0), epochs=2, seed=5, devices=devices)
    if metrics is not None:
        metrics.update(out)
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def test_two_server_processes_train_the_one_device_weights():
    start = {k: v.clone() for k, v in _tiny_llama().state_dict().items()}
    m1, m2 = {}, {}
    one = _fit(1, 8, m1)
    two = _fit(2, 8, m2)
    # the logged loss is the mean over both processes (sync_dist), i.e. the one-device epoch mean; rank 0's own
    # half would give another number
    assert m2["loss/task"] == pytest.approx(m1["loss/task"], abs=1e-5)
    moved = max(float((one[k] - start[k]).abs().max()) for k in one)
    assert moved > 1e-3                                       # the fits trained (4 AdamW steps at lr 0.01)
    gap = max(float((one[k] - two[k]).abs().max()) for k in one)
    assert gap < 1e-6, gap                                    # rank 0's weights came back, equal to one device's
    # the control: one device at half the batch (what two processes would do without the all-reduce, or with
    # the one-device batch each) trains other weights, so the agreement above is not a tolerance artefact
    half = _fit(1, 4)
    assert max(float((one[k] - half[k]).abs().max()) for k in one) > 100 * max(gap, 1e-7)


# slow tier (34 s on 2 cores, two full FedMKT runs): the default tier keeps the two-process agreement above (9 s)
@pytest.mark.federation
@pytest.mark.slow
def test_fedmkt_server_distills_on_two_processes(pico_zoo, tmp_path):
    """FedMKT end to end with its server's distillation over two processes: the run completes, the server's
    losses are logged and the LLM ends near the one-device run's (the parts' token counts differ and LoRA's
    dropout draws other masks, so not to the bit)."""
    from test_methods import SMALL

    from fedlab.experiment import run_experiment

    last = {}
    for d in (1, 2):
        cfg = load_config(None, SMALL + [f"output_dir={tmp_path}/runs{d}", "method.name=fedmkt", "backend.device=cpu",
                                         f"backend.server_devices={d}"])
        last[d] = run_experiment(cfg, progress=False).rounds[-1]
    for key in ("server/llm_task_loss", "server/llm_kd_loss", "server/public_loss_llm"):
        assert last[2][key] > 0
    assert last[2]["server/public_loss_llm"] == pytest.approx(last[1]["server/public_loss_llm"], rel=0.01)


@pytest.mark.parametrize("extra, needle", [
    (["method.name=fedavg", "backend.server_devices=2"], r"backend.server_devices=2: fedavg's server trains no model"),
    (["method.name=fedmkt", "backend.server_devices=3"], r"backend.server_devices=3: federation.batch_size=8"),
    # LLM2SLM is FedMKT with the LLM frozen: its server trains nothing to spread
    (["method.name=llm2slm", "backend.server_devices=2"], r"backend.server_devices=2: llm2slm's server trains no model"),
])
def test_server_devices_preflight_names_the_key(pico_zoo, tmp_path, extra, needle):
    from test_methods import SMALL

    from fedlab.experiment import run_experiment

    with pytest.raises(ConfigError, match=needle):
        run_experiment(load_config(None, SMALL + [f"output_dir={tmp_path}/runs", *extra]), progress=False)
    assert not (tmp_path / "runs").exists()
