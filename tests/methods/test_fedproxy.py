"""FedProxy end to end on a pico model: compression, PCR, H-TIES/TIES/FedAvg, both fusions."""
import pytest
import torch

from conftest import PICO
from fedlab.config import ConfigError, load_config
from fedlab.experiment import run_experiment
from fedlab.objectives import pcr_penalty
from fedlab.transforms.compress import make_proxy
from fedlab.transforms.fusion import ProxyTuned, plug_in_fusion

SMALL = PICO + ["data.partition=by_task", "data.num_clients=2", "data.tasks=[recall,sentiment]",
                "tracking.enabled=false", "data.public_size=32", "method.bi_samples=32"]


def _run(tmp_path, *extra):
    return run_experiment(load_config(None, ["method.name=fedproxy", *SMALL, f"output_dir={tmp_path}/runs", *extra]),
                          progress=False)


def test_pcr_penalty_by_hand():
    params = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    v = pcr_penalty(params, torch.tensor([0.0, 0.0, 1.0]), torch.tensor([1.0, 0.0, 0.5]))
    assert torch.isclose(v, torch.tensor(1.0 + 0.0 + 0.5 * 4))
    v.backward()
    assert torch.allclose(params.grad, torch.tensor([2.0, 0.0, 2.0]))


@pytest.mark.federation
def test_fedproxy_runs_with_pcr_and_logs_server_analysis(pico_zoo, tmp_path):
    h = _run(tmp_path, "method.pcr_lambda=1.0")
    r1, r2 = h.rounds[1], h.rounds[2]
    assert r1["loss/pcr"] == 0.0          # C^(0) = 0: no penalty in the first round
    assert r2["loss/pcr"] > 0.0
    for cid in (0, 1):
        assert f"server/r_client_{cid}" in r2 and r2[f"server/w_client_{cid}"] > 0
    assert r2["server/conflict_mean"] > 0          # two clients on different tasks disagree somewhere
    f = h.final
    assert f["proxy/kept_layers"] == 2      # pico-llama: 4 blocks, κ = 0.5
    assert "llm/acc/mean" in f and "llm_zeroshot/acc/mean" in f
    assert r2["bytes/down"] > r2["bytes/up"]  # φ and C go down, only φ_k comes up


# each variant and what it changes in round 1's log (the default, H-TIES with PCR, keeps about 0.79 of the
# coordinates and logs a PCR term)
VARIANTS = {
    "FedAvg without PCR": (["method.aggregator=fedavg", "method.pcr_lambda=0"],
                           lambda r: r["server/delta_nonzero"] == 1.0 and "loss/pcr" not in r),
    # TIES keeps each update's largest 20 % (density 0.2): two clients' merged update is at most 40 % nonzero
    "TIES": (["method.name=ties"], lambda r: 0 < r["server/delta_nonzero"] <= 0.4 and "loss/pcr" not in r),
    # the pooled proxy: one fit on every client's data, so one client's loss and one upload
    "pooled": (["method.pooled=true"], lambda r: "loss/task_client_0" in r and "loss/task_client_1" not in r
               and r["server/conflict_mean"] == 0.0),
    "FedProx": (["method.mu=0.1", "method.aggregator=fedavg"], lambda r: r["loss/proximal"] > 0),
}


@pytest.mark.federation
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_each_fedproxy_variant_changes_what_it_names(pico_zoo, tmp_path, variant):
    extra, took_effect = VARIANTS[variant]
    h = _run(tmp_path, *extra)
    assert took_effect(h.rounds[1]), {k: v for k, v in h.rounds[1].items() if k.startswith(("server/", "loss/"))}


def test_the_fusion_switch_picks_the_fusion_once_the_proxy_has_moved(pico_zoo, tmp_path):
    """Before any round both fusions give the LLM's logits (the proxy's LoRA starts at zero); once the proxy's
    state has moved, plug-in fusion (the proxy's blocks inside the LLM) and proxy tuning (the LLM's logits plus
    the tuned minus the untuned proxy's) give different logits, each different from the LLM's."""
    from fedlab import registry
    from fedlab.data.federated import build_federated_data

    ids = torch.tensor([[1, 5, 9, 13, 17, 21]])
    got, moved = {}, {}
    for fusion in ("proxy_tuning", "plugin"):
        cfg = load_config(None, ["method.name=fedproxy", *SMALL, f"output_dir={tmp_path}/runs", f"method.fusion={fusion}"])
        m = registry.get("fedproxy").method_cls(cfg, build_federated_data(cfg.data, cfg.seed))
        m.setup()
        g = torch.Generator().manual_seed(0)
        with torch.no_grad():
            llm = m.llm(ids).logits
            got[fusion] = m.fused_llm()(ids).logits
            m.global_state = {k: v + 0.05 * torch.randn(v.shape, generator=g) for k, v in m.global_state.items()}
            moved[fusion] = m.fused_llm()(ids).logits
    for fusion in got:
        assert torch.allclose(got[fusion], llm, atol=1e-5), fusion
        assert not torch.allclose(moved[fusion], llm, atol=1e-3), fusion
    assert not torch.allclose(moved["proxy_tuning"], moved["plugin"], atol=1e-3)


def test_fusion_of_an_untuned_proxy_is_the_llm(pico_zoo):
    from fedlab.models.zoo import load_model

    llm, tok = load_model("pico-llama")
    kept = [0, 3]
    proxy = make_proxy(llm, kept)
    fused = plug_in_fusion(llm, proxy, kept)
    for (n, a), (_, b) in zip(llm.state_dict().items(), fused.state_dict().items()):
        assert torch.equal(a, b), n
    batch = tok(["question: what is 2 plus 3? answer: 5"], return_tensors="pt")
    pt = ProxyTuned(llm, proxy, make_proxy(llm, kept))
    assert torch.allclose(pt(**batch).logits, llm(**batch).logits, atol=1e-5)


def test_kappa_that_leaves_no_block_fails_before_loading():
    with pytest.raises(ConfigError, match="method.kappa"):
        load_config(None, ["method.name=fedproxy", "model.name=pico-llama", "method.kappa=0.9"])
    with pytest.raises(ConfigError, match="method.rho"):
        load_config(None, ["method.name=fedproxy", "method.rho=0.9"])


def test_block_counts_known_without_loading_match_the_zoo():
    from fedlab.models.inspect import _ZOO_BLOCKS
    from fedlab.models.zoo import ZOO

    for name, spec in ZOO.items():
        cfg = spec.make_config(100, 0, 1)
        assert _ZOO_BLOCKS[name] == getattr(cfg, "num_hidden_layers", getattr(cfg, "n_layer", None)), name


def test_emulator_indices_by_hand():
    from fedlab.methods.fedproxy.offsite import emulator_indices

    assert emulator_indices(5, 3) == [0, 2, 4]
    assert emulator_indices(4, 3) == [0, 2, 3]      # 1.5 rounds half up
    assert emulator_indices(4, 1) == [0]
    assert emulator_indices(6, 6) == list(range(6))


@pytest.mark.parametrize("method, extra, lora_blocks", [
    ("fedot", ["method.adapter_front=1", "method.adapter_back=1"], {0, 2}),
    # at the proxy's size (4 blocks, κ = 0.5: 2 kept): the adapters 2 + 2 shrink to 1 + 0 around one emulator block
    ("fedot", ["method.size=proxy"], {0}),
    ("fedot_et", ["method.adapter_front=1", "method.adapter_back=1"], {0, 1, 2}),
    ("fedbiot", ["method.adapter_front=0", "method.adapter_back=2"], {1, 2}),
])
def test_offsite_family_layout_and_plug_in(pico_zoo, tmp_path, method, extra, lora_blocks):
    from fedlab.data.federated import build_federated_data
    from fedlab.methods.fedproxy.offsite import OffsiteTuning

    cfg = load_config(None, [f"method.name={method}", *SMALL, f"output_dir={tmp_path}/runs", *extra])
    ot = OffsiteTuning(cfg, build_federated_data(cfg.data, 0))
    ot.setup()
    # pico-llama: 4 blocks; middle of 2 (or 2 for fedbiot) sub-sampled by κ = 0.5 to 1 block; at the proxy's size
    # as many blocks as the proxy keeps, 4 − 2
    assert len(ot.kept_layers) == (2 if "method.size=proxy" in extra else 3)
    keys = ot.resident.spec.communicated
    got = {int(k.split(".layers.")[1].split(".")[0]) for k in keys}
    assert got == lora_blocks
    # plug-in touches the adapters only: LLM blocks outside them are unchanged
    fused = ot.fused_llm()
    from fedlab.transforms.compress import decoder_blocks

    adapters = {ot.kept_layers[p] for p in ot.adapter_positions}
    for j, (a, b) in enumerate(zip(decoder_blocks(ot.llm), decoder_blocks(fused))):
        if j not in adapters:
            assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))


@pytest.mark.federation
def test_fedbiot_sends_the_realigned_emulator(pico_zoo, tmp_path):
    h = _run(tmp_path, "method.name=fedbiot", "method.adapter_front=0", "method.adapter_back=2")
    r1, r2 = h.rounds[1], h.rounds[2]
    assert r1["server/realign_kl"] >= 0
    assert r2["bytes/down"] > r1["bytes/down"]   # from round 2 the emulator weights travel down too


def test_offsite_adapters_must_leave_a_middle():
    with pytest.raises(ConfigError, match="method.adapter_front"):
        load_config(None, ["method.name=fedot", "model.name=pico-llama"])


@pytest.mark.federation
def test_server_step_size_scales_the_global_delta(pico_zoo, tmp_path):
    """η_g = 1 is the paper (Δ applied as it is); η_g = 2 moves φ twice as far in round 1 (same client
    updates: round 1 starts from the same φ⁰); `denominator: all` is accepted and runs."""
    a = _run(tmp_path / "a", "federation.rounds=1", "method.pcr_lambda=0")
    b = _run(tmp_path / "b", "federation.rounds=1", "method.pcr_lambda=0", "method.eta_g=2")
    assert b.rounds[1]["server/delta_norm"] == pytest.approx(2 * a.rounds[1]["server/delta_norm"], rel=1e-6)
    c = _run(tmp_path / "c", "federation.rounds=1", "method.denominator=all")
    assert c.rounds[1]["server/delta_norm"] <= a.rounds[1]["server/delta_norm"] + 1e-9
    with pytest.raises(ConfigError, match="method.eta_g"):
        load_config(None, ["method.name=fedproxy", "method.eta_g=0"])


def test_fedbiot_realigns_against_the_llm_with_its_adapters_plugged_in(pico_zoo, tmp_path):
    """With an emulator that is the whole middle (κ = 0) the student (adapters + emulator) is the teacher
    (LLM + the same adapters): the re-alignment KL is 0 however far the adapters moved. A raw-LLM teacher
    would see the adapters' change as an error to distil away."""
    from fedlab.data.federated import build_federated_data
    from fedlab.methods.fedproxy.offsite import OffsiteTuning

    cfg = load_config(None, ["method.name=fedbiot", *SMALL, f"output_dir={tmp_path}/runs", "method.adapter_front=0",
                             "method.adapter_back=2", "method.kappa=0", "method.realign_steps=1",
                             "model.lora.dropout=0.0"])
    ot = OffsiteTuning(cfg, build_federated_data(cfg.data, 0))
    ot.setup()
    assert len(ot.kept_layers) == 4                              # nothing dropped: emulator = middle
    torch.manual_seed(0)
    ot.global_state = {k: v + 0.3 * torch.randn_like(v) for k, v in ot.global_state.items()}   # adapters moved
    assert ot._realign(1) == pytest.approx(0.0, abs=1e-6)


def test_the_deep_rows_separate_the_offsite_tuning_models_by_kappa():
    """The deep rows: on the 12-block tiny-llama-deep, κ = 0.3 and 0.5 give different Offsite-Tuning
    models (2 + 6 + 2 and 2 + 4 + 2 blocks) and proxies (8 and 6), where 6 blocks gave one OT model; every deep
    row of the table script resolves to that model and the method its label names."""

    from fedlab.config import load_config
    from fedlab.methods.fedproxy.offsite import emulator_indices, offsite_layout
    from fedlab.models.zoo import ZOO
    from fedlab.transforms.compress import n_dropped

    # the Offsite-Tuning model (2 adapter blocks each side, as the configs): at 6 blocks κ = 0.3 and 0.5 keep the
    # same single middle block; at 12 blocks 6 and 4 of the 8 middle blocks, evenly spread
    assert offsite_layout(6, 2, 2, 0.3) == offsite_layout(6, 2, 2, 0.5) == ([0, 1, 2, 4, 5], [0, 1, 3, 4], [2])
    assert offsite_layout(12, 2, 2, 0.3) == ([0, 1, 2, 3, 5, 6, 8, 9, 10, 11], [0, 1, 8, 9], [2, 3, 4, 5, 6, 7])
    assert offsite_layout(12, 2, 2, 0.5) == ([0, 1, 2, 4, 7, 9, 10, 11], [0, 1, 6, 7], [2, 3, 4, 5])
    assert (12 - n_dropped(12, 0.3), 12 - n_dropped(12, 0.5)) == (8, 6)
    assert emulator_indices(8, 4) == [0, 2, 5, 7] and emulator_indices(8, 6) == [0, 1, 3, 4, 6, 7]
    assert ZOO["tiny-llama-deep"].make_config(1000, 3, 2).num_hidden_layers == 12
    from fedlab.evidence.summary import load_table

    mod = load_table("fedproxy")
    deep = [p for p in mod.plan() if p.key.startswith("deep/")]
    assert len(deep) == 28                   # 21 rows, and 7 of the Offsite-Tuning family at the proxy's size
    for p in deep:
        cfg = load_config(p.config, list(p.overrides))
        assert cfg.model.name == "tiny-llama-deep", p.key
        expect = p.key.split("/")[2].replace("centsft", "centralized").removesuffix("_eq")
        assert cfg.method.name == expect, p.key


def test_the_offsite_tuning_model_at_the_proxys_size_keeps_as_many_blocks_as_the_proxy():
    """`method.size=proxy`: the model keeps blocks − n_dropped(blocks, κ) blocks, like FedProxy's proxy; adapters
    that would leave the emulator no block shrink in their front : back proportion (hand-computed layouts)."""
    from fedlab.methods.fedproxy.offsite import offsite_layout
    from fedlab.transforms.compress import n_dropped

    # 6 blocks, κ = 0.5: the proxy keeps 3; adapters 2 + 2 shrink to 1 + 1 around one emulator block
    assert offsite_layout(6, 2, 2, 0.5, "proxy") == ([0, 1, 5], [0, 2], [1])
    # κ = 0.3: 4 blocks, adapters 2 + 1 (3 · 2/4 rounded) around one
    assert offsite_layout(6, 2, 2, 0.3, "proxy") == ([0, 1, 2, 5], [0, 1, 3], [2])
    # 12 blocks, κ = 0.5: 6 blocks, the adapters as configured and 2 of the 8 middle blocks
    assert offsite_layout(12, 2, 2, 0.5, "proxy") == ([0, 1, 2, 9, 10, 11], [0, 1, 4, 5], [2, 3])
    # FedBiOT's adapter (the last 4 blocks) on 6 blocks: the last 2 and one emulator block
    assert offsite_layout(6, 0, 4, 0.5, "proxy") == ([0, 4, 5], [1, 2], [0])
    for blocks, kappa in ((6, 0.5), (6, 0.3), (12, 0.5), (12, 0.3)):
        assert len(offsite_layout(blocks, 2, 2, kappa, "proxy")[0]) == blocks - n_dropped(blocks, kappa)
    # the paper's layout is unchanged, and larger than the proxy on 6 blocks
    assert offsite_layout(6, 2, 2, 0.5) == offsite_layout(6, 2, 2, 0.5, "paper") == ([0, 1, 2, 4, 5], [0, 1, 3, 4], [2])
    from pathlib import Path

    cfg = load_config(Path(__file__).resolve().parents[2] / "experiments/fedproxy/homo.yaml",
                      ["method.name=fedbiot", "method.size=proxy"])
    assert cfg.method.size == "proxy"
