"""Co-PLMs: pooled KL across vocabularies against hand computations, next-token pairing between
two zoo tokenizers, SAML's loss by hand, the DPM cache, DST never uploading (bytes counted by hand), the
ablations, both backends, and bad input in one line."""
from __future__ import annotations

import json
import math

import pytest
import torch
import torch.nn.functional as F

from conftest import PICO
from fedlab.config import ConfigError, load_config
from fedlab.objectives import pooled_kl
from fedlab.objectives.pooling import mapped_pooled_kl

SLMS = ["pico-gpt2", "pico-opt", "pico-bloom"]
BASE = PICO + [f"model.clients=[{','.join(SLMS)}]", "data.num_clients=3", "data.partition=dirichlet_domain",
               "data.alpha=1.0", "data.public_source=holdout", "data.tasks=[recall,sentiment,friend]",
               "data.train_per_task=30", "data.test_per_task=8", "data.client_test_fraction=0.2",
               "tracking.enabled=false"]
HETERO = BASE + ["method.name=coplms", "method.topk=4", "method.dpm_epochs=1"]


# ------------------------------------------------------------------ kernels
def test_mapped_pooled_kl_with_the_identity_is_pooled_kl_per_position():
    torch.manual_seed(0)
    t, s = torch.randn(6, 20), torch.randn(6, 20)
    per_position = mapped_pooled_kl(t, s, 5)
    assert torch.allclose(per_position, torch.stack([pooled_kl(t[i], s[i], 5) for i in range(6)]), atol=1e-6)
    assert torch.allclose(per_position.sum() / 2, pooled_kl(t.reshape(2, 3, 20), s.reshape(2, 3, 20), 5), atol=1e-5)


def test_mapped_pooled_kl_merges_duplicate_ids_by_sum_by_hand():
    # teacher over 4 ids, student over 3; teacher ids 0 and 1 both map to student id 2
    pt = torch.tensor([0.4, 0.3, 0.2, 0.1])
    ps = torch.tensor([0.5, 0.2, 0.3])
    vmap = torch.tensor([2, 2, 0, 1])
    got = mapped_pooled_kl(pt.log()[None], ps.log()[None], 2, vmap)[0]
    # top-2 teacher ids {0, 1} -> student id 2: one bin of mass 0.7 against p_s[2] = 0.3, tails 0.3 vs 0.7
    want = 0.7 * math.log(0.7 / 0.3) + 0.3 * math.log(0.3 / 0.7)
    assert got.item() == pytest.approx(want, abs=1e-6)
    # k = 3 adds teacher id 2 -> student id 0: bins (0.7 | 0.3), (0.2 | 0.5), tails 0.1 vs 0.2
    got3 = mapped_pooled_kl(pt.log()[None], ps.log()[None], 3, vmap)[0]
    want3 = 0.7 * math.log(0.7 / 0.3) + 0.2 * math.log(0.2 / 0.5) + 0.1 * math.log(0.1 / 0.2)
    assert got3.item() == pytest.approx(want3, abs=1e-6)


def test_mapped_pooled_kl_tail_in_log_space_survives_a_peaked_teacher():
    t = torch.tensor([[60.0, 0.0, 0.0, 0.0]])
    s = torch.tensor([[0.0, 0.0, 0.0, 0.0]])
    got = mapped_pooled_kl(t, s, 1)[0]
    # p_t = [1 - 3e^-60, ...]: KL ≈ log(1 / 0.25) + tail·(log tail_t − log 0.75), finite
    assert torch.isfinite(got) and got.item() == pytest.approx(math.log(4.0), abs=1e-6)


def test_own_pooling_compares_each_sides_top_k_in_order():
    pt, ps = torch.tensor([0.6, 0.3, 0.1]), torch.tensor([0.2, 0.1, 0.7])
    got = mapped_pooled_kl(pt.log()[None], ps.log()[None], 1, pool_index="own")[0]
    want = 0.6 * math.log(0.6 / 0.7) + 0.4 * math.log(0.4 / 0.3)
    assert got.item() == pytest.approx(want, abs=1e-6)


def test_next_token_pairs_pair_the_positions_before_matched_tokens():
    from fedlab.align import next_token_pairs

    # tokens 1 and 2 of a match tokens 2 and 3 of b; both end with their EOS at positions 4 and 5
    assert next_token_pairs([(0, 0), (1, 2), (2, 3)]) == [(0, 1), (1, 2)]
    assert next_token_pairs([(0, 0), (1, 2), (2, 3)], (5, 6)) == [(0, 1), (1, 2), (3, 4)]


@pytest.fixture(scope="module")
def hetero_zoo(pico_zoo):
    from fedlab.models import zoo

    for name in SLMS:
        zoo.build(name, progress=False)
    return pico_zoo


def test_answer_positions_pair_across_two_zoo_tokenizers(hetero_zoo):
    """Paired logit positions predict tokens that spell the same characters, on the answer only."""
    from fedlab.align.normalize import canonical_tokens, surface
    from fedlab.data.tasks import Example
    from fedlab.knowledge.mutual import paired_items
    from fedlab.models.zoo import load_tokenizer

    a, b = load_tokenizer("pico-llama"), load_tokenizer("pico-gpt2")
    ex = Example("instruction: who is the friend of anna? response:", "bob miller", "friend", "d")
    item = paired_items([ex], a, b, 64)[0]
    assert item["pairs"], "no answer position paired"
    ta = canonical_tokens(a.convert_ids_to_tokens(item["a"]["input_ids"]))
    tb = canonical_tokens(b.convert_ids_to_tokens(item["b"]["input_ids"]))
    for i, j in item["pairs"]:
        assert item["a"]["labels"][i + 1] != -100 and item["b"]["labels"][j + 1] != -100
        if i + 2 < len(ta) or j + 2 < len(tb):   # all but the end-of-answer pair: the same characters next
            assert surface(ta[i + 1]) == surface(tb[j + 1])
    # the end of the answer pairs too (both tokenizations end with their EOS)
    assert (len(ta) - 2, len(tb) - 2) in item["pairs"]


def test_saml_losses_equal_a_hand_computation(hetero_zoo):
    from fedlab.data.tasks import Example
    from fedlab.knowledge.mutual import MutualModule, PairCollator, paired_items
    from fedlab.models.zoo import load_model

    ma, ta = load_model("pico-llama")
    mb, tb = load_model("pico-gpt2")
    for t in (ta, tb):
        t.pad_token = t.pad_token or t.eos_token
    exs = [Example("question: where does anna live? answer:", "paris", "recall", "d"),
           Example("instruction: who is the friend of bob? response:", "carl stone", "friend", "d")]
    items = paired_items(exs, ta, tb, 64)
    batch = PairCollator(ta.pad_token_id, tb.pad_token_id)(items)
    vab = torch.randint(0, mb.config.vocab_size, (ma.config.vocab_size,))
    vba = torch.randint(0, ma.config.vocab_size, (mb.config.vocab_size,))
    mod = MutualModule(ma, [], mb, [], w_a=0.3, w_b=0.8, k=4, vmap_ba=vba, vmap_ab=vab)
    with torch.no_grad():
        got = mod.losses(batch)
        la = ma(input_ids=batch["a"]["input_ids"], attention_mask=batch["a"]["attention_mask"]).logits
        lb = mb(input_ids=batch["b"]["input_ids"], attention_mask=batch["b"]["attention_mask"]).logits
    kt_a = kt_b = 0.0
    for r, it in enumerate(items):
        for i, j in it["pairs"]:
            kt_a += mapped_pooled_kl(lb[r, j][None], la[r, i][None], 4, vba)[0].item()
            kt_b += mapped_pooled_kl(la[r, i][None], lb[r, j][None], 4, vab)[0].item()
    paired = sum(len(it["pairs"]) for it in items)
    assert paired > 2                                   # several answer tokens: mean and per-example sum differ
    # the ablation (kt_reduction=sum): the positions' KL summed, per example (B = 2)
    with torch.no_grad():
        summed = MutualModule(ma, [], mb, [], w_a=0.3, w_b=0.8, k=4, vmap_ba=vba, vmap_ab=vab,
                              kt_reduction="sum").losses(batch)
    assert summed["kt_a"].item() == pytest.approx(kt_a / 2, rel=1e-5)
    # the default: per paired token, the CE's normalisation
    kt_a, kt_b = kt_a / paired, kt_b / paired

    def ce(logits, labels):
        sl, lab = logits[:, :-1], labels[:, 1:]
        m = lab != -100
        return F.cross_entropy(sl[m], lab[m]).item()

    ce_a, ce_b = ce(la, batch["a"]["labels"]), ce(lb, batch["b"]["labels"])
    assert got["kt_a"].item() == pytest.approx(kt_a, rel=1e-5)
    assert got["a"].item() == pytest.approx(0.3 * kt_a + 0.7 * ce_a, rel=1e-5)
    assert got["b"].item() == pytest.approx(0.8 * kt_b + 0.2 * ce_b, rel=1e-5)


# ------------------------------------------------------------------ end to end
def _run(tmp_path, *extra, base=HETERO):
    from fedlab.experiment import run_experiment

    return run_experiment(load_config(None, base + [f"output_dir={tmp_path}/runs", *extra]), progress=False)


@pytest.mark.federation
def test_coplms_end_to_end_uploads_only_the_dpm_lora(hetero_zoo, tmp_path, monkeypatch):
    from fedlab.comm.messages import FitRes
    from fedlab.methods.coplms import client as coplms_client
    from fedlab.runtime.resident import get_resident

    moved, fit = {}, coplms_client.CoPLMsClient.fit

    def recording_fit(self, ins):
        res = fit(self, ins)
        init, own = self.slm().init_state, self._own(coplms_client.SLM)
        moved[(self.cid, ins.round)] = set(own) == set(init) and any(not torch.equal(own[k], init[k]) for k in init)
        return res

    monkeypatch.setattr(coplms_client.CoPLMsClient, "fit", recording_fit)
    h = _run(tmp_path)
    r0, r1, r2 = h.rounds
    for r in (r0, r1, r2):   # every device's SLM, the LLM and the server's DPM are evaluated
        assert all(f"acc/client_{c}" in r for c in range(3)) and "llm/acc/mean" in r and "dpm/acc/mean" in r
    assert 0 < r1["saml/paired"] and r1["server/saml_paired"] >= r1["saml/paired"]   # identity pairs every position
    # the DPM's scores before distillation (round 0 has the distilled DPM's as dpm/…)
    assert "dpm_before/acc/mean" in r0 and "dpm_before/rougeL/mean" in r0 and "dpm/rougeL/mean" in r0
    # bytes by hand: down = the DPM LoRA (+ its name) to each device; up = the DPM LoRA (+ metrics) from each
    cfg = load_config(None, HETERO)
    from fedlab.data.federated import build_federated_data
    from fedlab.methods.coplms.dpm import build_dpm

    name, _ = build_dpm(cfg, list(build_federated_data(cfg.data, cfg.seed).public), progress=False)
    from fedlab.methods.coplms.client import dpm_chain

    lora = get_resident(cfg, name, None, dpm_chain(cfg)).init_state
    assert {v.shape[0] for k, v in lora.items() if "lora_A" in k} == {4}      # method.dpm_lora_r's default
    lora_bytes = sum(v.numel() * v.element_size() for v in lora.values())
    # down, exactly: per device the LoRA and the config {"dpm": name} (3 key bytes, the name as JSON text)
    assert r1["bytes/down"] == 3 * (lora_bytes + 3 + len(json.dumps(name)))
    # up: per device the LoRA, its example count (8 bytes) and its metrics, no adapter tensor
    assert FitRes(0, 1, lora, 1, {}).nbytes() == lora_bytes + 8
    assert 3 * (lora_bytes + 8) < r1["bytes/up"] < 3 * (lora_bytes + 8) + 3 * 1500
    # every device's SLM learnt: after each of its fits its own LoRA differs from the SLM's initial LoRA
    assert sorted(moved) == [(c, rnd) for c in range(3) for rnd in (1, 2)] and all(moved.values())
    # server SAML moved the LLM: the resident LLM holds the trained LoRA, not its initial one
    from fedlab.transforms.lora import get_state

    llm = get_resident(cfg)
    now = get_state(llm.model, list(llm.init_state))
    assert any(not torch.equal(now[k], v) for k, v in llm.init_state.items())


@pytest.mark.parametrize("targets", [None, "[all-linear]"])
def test_dst_adapters_train_and_never_leave_the_device(hetero_zoo, tmp_path, targets):
    from fedlab.comm.messages import FitIns
    from fedlab.config import load_config as lc
    from fedlab.data.federated import build_federated_data
    from fedlab.methods.coplms.dpm import build_dpm
    from fedlab.runtime.host import ClientHost
    from fedlab.runtime.resident import clear_residents, get_resident

    clear_residents()
    # with every linear layer LoRA-wrapped, the adapters' own Linear layers still get no LoRA factors
    cfg = lc(None, HETERO + ["federation.rounds=1"] + ([f"model.lora.target_modules={targets}"] if targets else []))
    name, _ = build_dpm(cfg, list(build_federated_data(cfg.data, cfg.seed).public), progress=False)
    host = ClientHost(cfg, [0])
    from fedlab.methods.coplms.client import dpm_chain

    server_lora = get_resident(cfg, name, None, dpm_chain(cfg)).init_state
    res = host.fit(0, FitIns(1, server_lora, {"dpm": name}))
    adapters = [k for k in host.client_state(0) if k.startswith("adapters/")]
    assert adapters and set(res.state) == set(server_lora)            # up: the DPM LoRA, nothing else
    assert not any("adapter" in k for k in res.state)
    ups = [v for k, v in host.client_state(0).items() if k.startswith("adapters/") and k.endswith("up.weight")]
    assert any(float(u.abs().sum()) > 0 for u in ups)                  # DST moved the zero-initialised W2
    assert any(not torch.equal(res.state[k], server_lora[k]) for k in res.state)   # SAML moved the DPM LoRA


@pytest.mark.federation
def test_coplms_same_numbers_on_both_backends(hetero_zoo, tmp_path):
    a = _run(tmp_path / "a", "federation.rounds=1")
    b = _run(tmp_path / "b", "federation.rounds=1", "backend.name=ray", "backend.num_cpus=2")
    for key in ("acc/mean", "llm/acc/mean", "dpm/acc/mean", "saml/kt_dpm", "server/saml_llm", "bytes/up"):
        assert a.rounds[-1][key] == pytest.approx(b.rounds[-1][key], rel=1e-6), key


@pytest.mark.federation
def test_ablations_drop_what_they_name(hetero_zoo, tmp_path):
    no_dst = _run(tmp_path / "d", "method.name=coplms_no_dst", "federation.rounds=1")
    assert "dst/task" not in no_dst.rounds[1] and "saml/kt_dpm" in no_dst.rounds[1]
    no_saml = _run(tmp_path / "s", "method.name=coplms_no_saml", "federation.rounds=1")
    assert "server/llm_ce" in no_saml.rounds[1] and "server/saml_kt_llm" not in no_saml.rounds[1]
    with pytest.raises(ConfigError, match="method.name=coplms"):
        load_config(None, HETERO + ["method.name=coplms_no_dst", "method.dst=true"])


def test_the_dpm_is_cached_under_what_built_it(hetero_zoo):
    from fedlab.data.federated import build_federated_data
    from fedlab.methods.coplms.dpm import build_dpm
    from fedlab.models.derived import read_derived_meta

    cfg = load_config(None, HETERO)
    public = list(build_federated_data(cfg.data, cfg.seed).public)
    name, info = build_dpm(cfg, public, progress=False)
    again, _ = build_dpm(cfg, public, progress=False)
    assert again == name and read_derived_meta(name)["built"]["kept_layers"] == info["kept_layers"]
    other, _ = build_dpm(load_config(None, HETERO + ["method.kappa=0.25"]), public, progress=False)
    assert other != name and len(read_derived_meta(other)["built"]["kept_layers"]) == 3


@pytest.mark.parametrize("override, needle", [
    (["method.topk=0"], "method.topk"),
    (["method.alpha=1.5"], "method.alpha"),
    (["method.beta=-0.1"], "method.beta"),
    (["method.kappa=0.9"], "method.kappa"),
    (["method.pool_index=both"], "method.pool_index"),
    (["method.dpm_distill=sideways"], "method.dpm_distill"),
])
def test_bad_coplms_configs_name_the_key(override, needle):
    with pytest.raises(ConfigError, match=needle):
        load_config(None, HETERO + override)


@pytest.mark.federation
def test_a_dpm_without_the_llms_tokenizer_is_one_line(hetero_zoo, tmp_path):
    with pytest.raises(ConfigError, match="method.dpm_init.*tokenizer"):
        _run(tmp_path, "method.dpm_init=pico-gpt2")


# ------------------------------------------------------------------ baselines and data
@pytest.mark.federation
def test_fedap_trains_and_sends_only_bottleneck_adapters(hetero_zoo, tmp_path):
    from fedlab.runtime.resident import get_resident
    from fedlab.transforms import transform

    over = ["method.name=fedap", "model.name=pico-gpt2", "model.clients=null", "federation.rounds=1"]
    h = _run(tmp_path, *over, base=BASE)
    cfg = load_config(None, BASE + over)
    res = get_resident(cfg, chain=(transform("adapters", width=0.0625, where="attn_ffn"),
                                   transform("train_groups", groups=("adapters",))))
    assert res.spec.trainable and all("fedlab_adapter" in k for k in res.spec.trainable)
    assert not any("lora" in k for k, _ in res.model.named_parameters())          # no LoRA in the chain
    per_client = sum(v.numel() * 4 for v in res.init_state.values())
    assert h.rounds[1]["bytes/down"] >= 3 * per_client and h.rounds[1]["bytes/up"] >= 3 * per_client
    assert h.rounds[1]["bytes/up"] < 3 * per_client + 3 * 1500


@pytest.mark.federation
def test_fedcollm_returns_each_device_its_distilled_lora(hetero_zoo, tmp_path):
    h = _run(tmp_path, "method.name=fedcollm", "method.topk=4", "federation.rounds=1", base=BASE)
    r = h.rounds[1]
    assert all(f"server/kd_kt_slm_client_{c}" in r for c in range(3))   # one distillation per SLM family
    assert "llm/rougeL/mean" in r and "rougeL/mean" in r
    homo = _run(tmp_path / "h", "method.name=fedcollm", "model.clients=[pico-gpt2,pico-gpt2,pico-gpt2]",
                "federation.rounds=1", base=BASE)
    assert "server/kd_kt_slm" in homo.rounds[1]                        # one architecture: FedAvg, then one KD


def test_client_test_splits_are_held_out_of_each_partition():
    from fedlab.data.federated import build_federated_data

    cfg = load_config(None, HETERO)
    data = build_federated_data(cfg.data, cfg.seed)
    whole = build_federated_data(load_config(None, HETERO + ["data.client_test_fraction=0"]).data, cfg.seed)
    for c in range(3):
        train, test = set(map(id, data.train[c])), data.client_test[c]
        assert len(test) == round(0.2 * len(whole.train[c])) and not train & set(map(id, test))
        assert sorted(map(repr, data.train[c] + test)) == sorted(map(repr, whole.train[c]))
        assert data.test_examples("friend", c) == [e for e in test if e.task == "friend"]
    assert whole.client_test is None and whole.test_examples("friend", 0) == list(whole.test["friend"])


def test_generative_means_per_client_and_overall():
    from fedlab.comm.messages import EvalRes
    from fedlab.eval.summary import server_summary, summarize_eval

    out = summarize_eval({0: EvalRes(0, 1, {"rougeL/a": 0.5, "n/a": 10, "rougeL/b": 1.0, "n/b": 30, "em/a": 0.0,
                                            "em/b": 1.0}),
                          1: EvalRes(1, 1, {"rougeL/a": 0.2, "n/a": 5, "em/a": 0.2})})
    assert out["rougeL/client_0"] == pytest.approx((0.5 * 10 + 1.0 * 30) / 40)
    assert out["rougeL/mean"] == pytest.approx((0.875 + 0.2) / 2)
    assert out["em/mean"] == pytest.approx((0.75 + 0.2) / 2)
    assert out["rougeL/task_a"] == pytest.approx(0.35)
    assert (out["rougeL_client_0/a"], out["rougeL_client_0/b"], out["em_client_0/b"]) == (0.5, 1.0, 1.0)
    assert "rougeL_client_1/a" not in out          # a client with one task: its mean is that task's score
    assert "rougeL/client_0" not in server_summary({0: EvalRes(0, 1, {"rougeL/a": 0.5})})
    assert not any(k.startswith("rougeL_client_") for k in server_summary({0: EvalRes(0, 1, {"rougeL/a": 0.5,
                                                                                            "rougeL/b": 1.0})}))


@pytest.mark.federation
def test_coplms_resumes_after_a_crash_with_the_devices_state(hetero_zoo, tmp_path, monkeypatch):
    """A run that dies in round 2 resumes from round 1's checkpoint — the DPM LoRA, the LLM's LoRA and each
    device's adapters and SLM LoRA — and ends where an uninterrupted run ends."""
    from fedlab.methods.coplms.method import CoPLMs

    over = ["federation.rounds=3", "tracking.enabled=false"]
    clean = _run(tmp_path / "clean", *over)
    original = CoPLMs.run_round

    def dies_in_round_2(self, rnd, ctx):
        if rnd == 2:
            raise RuntimeError("killed")
        return original(self, rnd, ctx)

    monkeypatch.setattr(CoPLMs, "run_round", dies_in_round_2)
    with pytest.raises(RuntimeError, match="killed"):
        _run(tmp_path / "crash", *over)
    played = []

    def records(self, rnd, ctx):
        played.append(rnd)
        return original(self, rnd, ctx)

    monkeypatch.setattr(CoPLMs, "run_round", records)
    resumed = _run(tmp_path / "crash", *over, "resume=true")
    assert played == [2, 3]                                  # round 1 came from the checkpoint
    for key in ("rougeL/mean", "acc/mean", "llm/acc/mean", "dpm/acc/mean", "saml/kt_dpm"):
        assert resumed.rounds[-1][key] == pytest.approx(clean.rounds[-1][key], rel=1e-6), key


def test_mapped_pooled_kl_drops_teacher_logits_past_the_tokenizer():
    # a teacher with 2 padded logit columns (no token): the result equals the teacher without them
    torch.manual_seed(1)
    t, s = torch.randn(3, 6), torch.randn(3, 4)
    vmap = torch.tensor([3, 2, 1, 0])
    padded = torch.cat([t[:, :4], torch.full((3, 2), 5.0)], -1)
    assert torch.allclose(mapped_pooled_kl(padded, s, 2, vmap), mapped_pooled_kl(t[:, :4], s, 2, vmap))


def test_the_dpm_upload_check_refuses_a_dpm_larger_than_an_slm():
    """Co-PLMs' DPM keeps the LLM's width: at model.lora.r its LoRA outweighs a narrower SLM's (hetero.yaml:
    18,432 floats against 12,288), and the run is refused before anything is built; the default rank 4 (9,216)
    passes, and so does the declared opt-out."""
    from fedlab.experiment import preflight
    from fedlab.methods.coplms.upload import dpm_and_slm_floats

    yaml = "experiments/coplms/hetero.yaml"
    cfg = load_config(yaml, [])
    assert dpm_and_slm_floats(cfg) == (9216, [("tiny-bloom", 12288), ("tiny-gpt2", 12288), ("tiny-opt", 12288)])
    preflight(cfg)
    with pytest.raises(ConfigError) as e:
        preflight(load_config(yaml, ["method.dpm_lora_r=null"]))
    assert str(e.value).startswith("method.dpm_lora_r: the DPM's LoRA uploads 18,432 floats a round, not fewer "
                                   "than tiny-bloom's 12,288")
    preflight(load_config(yaml, ["method.dpm_lora_r=null", "method.dpm_upload_check=false"]))


def test_the_dpm_upload_check_says_when_it_cannot_size_the_models(monkeypatch, capsys):
    """A model the planner cannot size is not compared, and the run says so in one line instead of passing
    silently."""
    from fedlab.methods.coplms import upload

    def unsizable(cfg):
        raise ValueError("no architecture for 'my-llm'")

    monkeypatch.setattr(upload, "dpm_and_slm_floats", unsizable)
    upload.check_upload(load_config("experiments/coplms/hetero.yaml", []))
    err = capsys.readouterr().err
    assert "cannot size these models (no architecture for 'my-llm')" in err and err.count("\n") == 1


def test_the_dpm_lora_keeps_alpha_over_r(hetero_zoo):
    """method.dpm_lora_r sets the DPM's LoRA rank and scales α with it: the LoRA scaling α/r stays model.lora's."""
    from fedlab.methods.coplms.client import dpm_chain, dpm_lora
    from fedlab.runtime.resident import get_resident

    cfg = load_config(None, HETERO + ["model.lora.r=8", "model.lora.alpha=16", "method.dpm_lora_r=2"])
    assert dpm_lora(load_config(None, HETERO + ["model.lora.r=8", "method.dpm_lora_r=8"])) == ()
    model = get_resident(cfg, "pico-llama", None, dpm_chain(cfg)).model
    layers = [m for m in model.modules() if hasattr(m, "lora_A") and "default" in getattr(m, "lora_A", {})]
    assert layers and all(m.lora_A["default"].weight.shape[0] == 2 and m.scaling["default"] == 16 / 8 for m in layers)


@pytest.mark.federation
def test_the_server_runs_dst_on_its_data_before_server_saml(hetero_zoo, tmp_path, monkeypatch):
    """The server's DPM trains its own domain adapters on D^s (DST) before server SAML, keeps them
    (never in the broadcast), and is scored with them."""
    from fedlab.methods.coplms import method as coplms_method

    seen = {}
    original, dst = coplms_method.CoPLMs.server_learning, coplms_method.domain_tuning

    def spy(self, rnd):
        seen["method"] = self
        return original(self, rnd)

    def dst_spy(cfg, dpm, dataset, seed):
        seen["dst_rows"] = len(dataset)
        return dst(cfg, dpm, dataset, seed)

    train_mutual = coplms_method.train_mutual

    def saml_spy(cfg, module, *args, **kwargs):
        dpm = seen["method"].server_dpm
        before = {k: p.detach().clone() for k, p in dpm.model.named_parameters() if "fedlab_adapter" in k}
        out = train_mutual(cfg, module, *args, **kwargs)
        after = dict(dpm.model.named_parameters())
        seen["saml_moved_adapters"] = any(not torch.equal(v, after[k]) for k, v in before.items())
        return out

    monkeypatch.setattr(coplms_method.CoPLMs, "server_learning", spy)
    monkeypatch.setattr(coplms_method, "domain_tuning", dst_spy)
    monkeypatch.setattr(coplms_method, "train_mutual", saml_spy)
    h = _run(tmp_path, "federation.rounds=1")
    m = seen["method"]
    assert seen["dst_rows"] == len(m.data.public)                       # DST on the server's data
    ups = [v for k, v in m.server_adapters.items() if k.endswith("up.weight")]
    assert ups and any(float(v.abs().sum()) > 0 for v in ups)          # moved the zero-initialised W2
    assert not set(m.server_adapters) & set(m.global_state)            # the broadcast is the LoRA alone
    assert "server/dst_task" in h.rounds[1] and "dpm/acc/mean" in h.rounds[1]
    from fedlab.transforms import get_state, set_state

    dpm = m.server_dpm
    set_state(dpm.model, dpm.initial["adapters"])                       # as a device's fit would leave them
    dpm = m._load_server_dpm()                                          # what the server scores: its adapters
    now = get_state(dpm.model, list(m.server_adapters))
    assert all(torch.equal(now[k], v) for k, v in m.server_adapters.items())
    assert seen["saml_moved_adapters"] is False                         # server SAML leaves them as DST made them


@pytest.mark.federation
def test_the_broadcast_is_the_post_saml_dpm_lora_of_a_uniform_average(hetero_zoo, tmp_path, monkeypatch):
    """Round r's uploads are averaged uniformly over the devices (not by their data sizes), server SAML moves
    that average, and round r+1 sends the devices the post-SAML DPM LoRA, not the plain average."""
    from fedlab.methods.coplms import method as coplms_method

    seen = {"averages": [], "sent": []}
    fedavg = coplms_method.fedavg

    def avg_spy(stacked, weights=None):
        out = fedavg(stacked, weights)
        seen["averages"].append(out.clone())
        torch.testing.assert_close(out, stacked.mean(0))                 # uniform over the devices
        return out

    original_round, original_learning = coplms_method.CoPLMs.run_round, coplms_method.CoPLMs.server_learning

    def round_spy(self, rnd, ctx):
        fit = ctx.fit

        def fit_spy(ins):
            seen["sent"].append({k: v.clone() for k, v in next(iter(ins.values())).state.items()})
            return fit(ins)

        ctx.fit = fit_spy
        return original_round(self, rnd, ctx)

    def learning_spy(self, rnd):
        out = original_learning(self, rnd)
        seen.setdefault("after_saml", []).append({k: v.clone() for k, v in self.global_state.items()})
        return out

    monkeypatch.setattr(coplms_method, "fedavg", avg_spy)
    monkeypatch.setattr(coplms_method.CoPLMs, "run_round", round_spy)
    monkeypatch.setattr(coplms_method.CoPLMs, "server_learning", learning_spy)
    _run(tmp_path, "federation.rounds=2")
    keys = list(seen["sent"][1])
    sent = torch.cat([seen["sent"][1][k].flatten() for k in keys])
    after = torch.cat([seen["after_saml"][0][k].flatten() for k in keys])
    assert torch.equal(sent, after)                                    # round 2 receives the post-SAML LoRA
    assert not torch.equal(seen["averages"][0], after)                 # which server SAML moved


def test_dst_trains_only_adapters_and_saml_only_the_two_loras(hetero_zoo, monkeypatch):
    from fedlab.comm.messages import FitIns
    from fedlab.data.federated import build_federated_data
    from fedlab.methods.coplms import client as coplms_client
    from fedlab.methods.coplms.dpm import build_dpm
    from fedlab.runtime.host import ClientHost
    from fedlab.runtime.resident import clear_residents, get_resident

    clear_residents()
    cfg = load_config(None, HETERO + ["federation.rounds=1"])
    name, _ = build_dpm(cfg, list(build_federated_data(cfg.data, cfg.seed).public), progress=False)
    moved = {}

    def snapshot(*models):
        return {(i, k): p.detach().clone() for i, m in enumerate(models) for k, p in m.named_parameters()}

    def changed(before, *models):
        after = snapshot(*models)
        return {k for k in before if not torch.equal(before[k], after[k])}

    dst, saml = coplms_client.CoPLMsClient.domain_tuning, coplms_client.CoPLMsClient.mutual_learning

    def dst_spy(self, ins, dpm, examples):
        before = snapshot(dpm.model)
        out = dst(self, ins, dpm, examples)
        moved["dst"] = ({k for _, k in changed(before, dpm.model)}, set(dpm.keys["adapters"]))
        return out

    def saml_spy(self, ins, dpm, slm, examples):
        before = snapshot(dpm.model, slm.model)
        out = saml(self, ins, dpm, slm, examples)
        moved["saml"] = (changed(before, dpm.model, slm.model),
                         {(0, k) for k in dpm.spec.trainable} | {(1, k) for k in slm.spec.trainable})
        return out

    monkeypatch.setattr(coplms_client.CoPLMsClient, "domain_tuning", dst_spy)
    monkeypatch.setattr(coplms_client.CoPLMsClient, "mutual_learning", saml_spy)
    host = ClientHost(cfg, [0])
    host.fit(0, FitIns(1, get_resident(cfg, name, None, coplms_client.dpm_chain(cfg)).init_state, {"dpm": name}))
    got, allowed = moved["dst"]
    assert got and got <= allowed                                      # DST: adapters only
    got, allowed = moved["saml"]
    assert any(i == 0 for i, _ in got) and any(i == 1 for i, _ in got) and got <= allowed   # SAML: the two LoRAs


def _tables_module():

    from fedlab.evidence.summary import load_table

    return load_table("coplms")


def test_table_1_has_a_standalone_server_llm(tmp_path):
    """Table 1's Standalone row shows a server LLM too — the LLM tuned on the server's data alone, which
    is the w/o SAML run's LLM (it never sees the devices)."""
    from fedlab.evidence.runner import Results

    mod = _tables_module()
    r = Results(tmp_path / "results.json")
    devices = {f"{m}/client_{c}": 0.3 for m in ("rougeL", "em") for c in range(3)} | {"rougeL/mean": 0.3, "em/mean": 0.3}
    for seed in range(2):
        r.records[f"s@{seed}"] = {"key": "hetero/lambda1/standalone", "seed": seed, "final": devices}
        r.records[f"n@{seed}"] = {"key": "ablation/lambda1/coplms_no_saml", "seed": seed,
                                  "final": devices | {"llm/rougeL/mean": 0.5, "llm/em/mean": 0.25}}
    row = next(ln for ln in mod.render(r).splitlines() if ln.startswith("| 1 | Standalone |"))
    assert row.split("|")[6].strip() == "50.0 ± 0.0 / 25.0 ± 0.0 ◌*"       # ◌: no answer shares in these records


def test_table_1_and_2_show_the_device_score_the_claims_compare_beside_the_mean_over_every_cell(tmp_path,
                                                                                                  monkeypatch):
    """Each device row of Tables 1 and 2 ends with the devices' Rouge-L over the cells the claims read
    (`device_score` of the row's families), beside the device mean over every cell."""
    from fedlab.evidence.runner import Results

    mod = _tables_module()
    asked = []

    def score(families=None, tasks=None, real=False):
        asked.append((families, real))
        return lambda rec: rec["final"]["rougeL/mean"] + 0.25

    monkeypatch.setattr(mod, "device_score", score)
    r = Results(tmp_path / "results.json")
    devices = {f"{m}/client_{c}": 0.3 for m in ("rougeL", "em") for c in range(3)} | {"rougeL/mean": 0.3, "em/mean": 0.3}
    keys = ("hetero/lambda1/fedcollm", "ablation/lambda1/coplms_no_dst", "homo/tiny-opt/lambda1/fedlora",
            "real/hetero/fedcollm")
    for seed in range(2):
        for k in keys:
            r.records[f"{k}@{seed}"] = {"key": k, "seed": seed, "final": devices}
    sections = {s.split("\n", 1)[0]: s for s in mod.render(r).split("\n## ")}
    rows = [ln for title, s in sections.items() if title.startswith(("Table 1, heterogeneous", "Table 1, homogeneous",
                                                                    "Table 1 with a real LLM", "Table 2, ablations"))
            for ln in s.splitlines() if ln.startswith(("| 1 | ", "| tiny-opt | 1 | "))]
    assert len(rows) == 4
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[-2].startswith("30.0 ± 0.0 / 30.0 ± 0.0") and cells[-1].startswith("55.0 ± 0.0"), row
    assert (("tiny-opt",) * 3, False) in asked and (None, True) in asked and (None, False) in asked


def test_dpm_distillation_is_reverse_kl_over_positions_with_a_next_token_by_hand():
    """token_kl (MiniLLM's direction): KL(p_s ‖ p_t) averaged over the masked positions; forward is
    KL(p_t ‖ p_s); the masked-out position does not count."""
    from fedlab.methods.coplms.dpm import token_kl

    pt = torch.tensor([[[0.5, 0.5], [0.9, 0.1]]])     # teacher, 2 positions over 2 tokens
    ps = torch.tensor([[[0.8, 0.2], [0.1, 0.9]]])     # student
    mask = torch.tensor([[1, 0]])                     # only the first position has a next token

    def kl(p, q):
        return sum(a * math.log(a / b) for a, b in zip(p, q))

    assert float(token_kl(pt.log(), ps.log(), mask)) == pytest.approx(kl([0.8, 0.2], [0.5, 0.5]), abs=1e-6)
    assert float(token_kl(pt.log(), ps.log(), mask, "forward")) == pytest.approx(kl([0.5, 0.5], [0.8, 0.2]), abs=1e-6)
    both = (kl([0.8, 0.2], [0.5, 0.5]) + kl([0.1, 0.9], [0.9, 0.1])) / 2
    assert float(token_kl(pt.log(), ps.log(), torch.ones(1, 2))) == pytest.approx(both, abs=1e-6)


class _Logits(torch.nn.Module):
    """A model whose logits are a table lookup: enough for MutualModule.losses."""

    def __init__(self, vocab: int, seed: int):
        super().__init__()
        self.table = torch.nn.Embedding(vocab, vocab)
        torch.nn.init.normal_(self.table.weight, generator=torch.Generator().manual_seed(seed))

    def forward(self, input_ids, attention_mask):
        from types import SimpleNamespace

        return SimpleNamespace(logits=self.table(input_ids))


def test_each_side_of_saml_learns_only_through_its_own_model():
    """L_a = α·KT(b → a) + (1 − α)·CE_a must not move model b (the teacher's logits are detached), and the
    other way round: each loss's gradient lands on its own model only, and α weighs a's KT term."""
    from fedlab.knowledge.mutual import MutualModule

    a, b = _Logits(6, 0), _Logits(6, 1)
    ids = torch.tensor([[1, 2, 3, 4]])
    batch = {"a": {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": torch.tensor([[-100, 2, 3, 4]])},
             "b": {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": torch.tensor([[-100, 2, 3, 4]])},
             "pairs": torch.tensor([[0, 1, 1], [0, 2, 2]]), "size": torch.tensor(1)}
    m = MutualModule(a, ["table.weight"], b, ["table.weight"], w_a=0.7, w_b=0.2, k=3)
    parts = m.losses(batch)
    assert float(parts["a"]) == pytest.approx(float(0.7 * parts["kt_a"] + 0.3 * parts["ce_a"]), abs=1e-6)
    assert float(parts["b"]) == pytest.approx(float(0.2 * parts["kt_b"] + 0.8 * parts["ce_b"]), abs=1e-6)
    parts["a"].backward(retain_graph=True)
    assert a.table.weight.grad.abs().sum() > 0 and b.table.weight.grad is None
    a.table.weight.grad = None
    parts["b"].backward()
    assert b.table.weight.grad.abs().sum() > 0 and a.table.weight.grad is None


@pytest.mark.federation
def test_saml_weights_alpha_on_the_dpm_and_beta_on_the_other_model(hetero_zoo, tmp_path, monkeypatch):
    """On a device the DPM (model a) learns from the SLM with weight α and the SLM (model b) from the
    DPM with β; on the server the DPM with α and the LLM with β. Swapping them anywhere fails here."""
    from fedlab.knowledge import mutual
    from fedlab.methods.coplms import client as coplms_client
    from fedlab.methods.coplms import method as coplms_method

    seen, reductions = [], []

    class Recording(mutual.MutualModule):
        def __init__(self, model_a, keys_a, model_b, keys_b, **kw):
            seen.append((type(model_a).__name__, len(keys_a), len(keys_b), kw["w_a"], kw["w_b"]))
            reductions.append(kw["kt_reduction"])
            super().__init__(model_a, keys_a, model_b, keys_b, **kw)

    monkeypatch.setattr(coplms_client, "MutualModule", Recording)
    monkeypatch.setattr(coplms_method, "MutualModule", Recording)
    _run(tmp_path, "federation.rounds=1", "method.alpha=0.9", "method.beta=0.1", "method.kt_reduction=sum")
    assert len(seen) == 4                               # three devices and the server
    assert all((w_a, w_b) == (0.9, 0.1) for *_, w_a, w_b in seen)
    assert reductions == ["sum"] * 4                    # the ablation's reduction reaches every SAML
    # model a is the DPM in every call: the same LoRA key count on the devices and the server (the SLM families
    # differ from it and among themselves, so a swap on any device would show as a second count)
    assert len({n_a for _, n_a, *_ in seen}) == 1 and len({n_b for *_, n_b, _, _ in seen}) > 1


def test_control_columns_are_the_tables_tasks_and_learnable_from_the_prompt():
    """The positive control scores the tasks Table 1 runs, and those are tasks whose test answers follow
    from the prompt (no fact about a held-out person), trained as generated answers."""
    from fedlab.data.tasks import TASKS

    mod = _tables_module()
    cfg = load_config(mod.HERE / "hetero.yaml", [])
    assert tuple(cfg.data.tasks) == mod.CONTROL_TASKS
    assert all(TASKS[t].kind == "classification" for t in cfg.data.tasks)
    assert cfg.data.choices_as_text and cfg.eval.mc_generate


def test_the_control_holds_against_chance_in_every_seed_and_flags_one_answer(tmp_path):
    """A task counts as learnt when every seed's centralized exact match ends 10 points above chance, not above
    zero-shot (a model that never stopped after its answer scored EM 0 zero-shot, and one constant answer scores
    chance); the rows' detail table flags the seeds that answer one class."""
    from fedlab.evidence.controls import check
    from fedlab.evidence.runner import Results

    mod = _tables_module()
    r = Results(tmp_path / "results.json")
    for seed, (learnt, constant) in enumerate([(0.90, 0.50), (0.92, 0.52), (0.88, 0.48)]):
        final = {"em/task_sentiment": learnt, "acc/task_sentiment": learnt, "top/task_sentiment": 0.6,
                 "em/task_entailment": constant, "acc/task_entailment": constant, "top/task_entailment": 1.0,
                 "em/task_paraphrase": 0.8, "em/task_topic": 0.8}
        r.records[f"c@{seed}"] = {"key": "control/tiny-llama/centralized", "seed": seed, "final": final}
        r.records[f"z@{seed}"] = {"key": "control/tiny-llama/zeroshot", "seed": seed,
                                  "final": {"em/task_sentiment": 0.0, "em/task_entailment": 0.0}}
    st = check(r, mod.learns("tiny-llama"))
    assert not st.holds and st.failing() == "entailment in every seed"       # 0.5 is chance, not 0.5 + 0.1
    assert check(r, mod.learns("tiny-llama").on(["sentiment", "paraphrase", "topic"])).holds
    row = next(ln for ln in mod.control_table(r) if ln.startswith("| tiny-llama |")).split("|")
    assert row[2].strip() == "0.0 ± 0.0 → 90.0 ± 5.0"
    assert row[3].strip().endswith("⚠3/3")


def test_table_1_multiple_choice_half_and_the_per_round_curves(tmp_path):
    """Table 1's multiple-choice half (topic: generated Rouge-L / EM with the choice accuracy beside, per
    device and for the LLM), and the per-round curves of the server LLM and DPM averaged over seeds at the rounds
    every run scored (curves.png written)."""
    from fedlab.evidence.runner import Results

    mod = _tables_module()
    r = Results(tmp_path / "results.json")
    final = {f"acc_client_{c}/topic": 0.5 + 0.1 * c for c in range(3)} | {
        "rougeL/task_topic": 0.8, "em/task_topic": 0.7, "acc/task_topic": 0.9,
        "llm/rougeL/task_topic": 0.6, "llm/em/task_topic": 0.5, "llm/acc/task_topic": 0.4}
    for seed in range(2):
        r.records[f"h@{seed}"] = {"key": "hetero/lambda1/coplms", "seed": seed, "final": final}
        rounds = [{"round": x, "llm/rougeL/mean": 0.1 * x + 0.1 * seed, "dpm/rougeL/mean": 0.2, "rougeL/mean": 0.3}
                  for x in range(16) if seed == 0 or x != 7]          # seed 1 did not score round 7
        r.records[f"c@{seed}"] = {"key": "curves/lambda1/coplms", "seed": seed, "final": {}, "rounds": rounds}
    row = next(ln for ln in mod.multiple_choice(r) if ln.startswith("| 1 | Co-PLMs |")).split("|")
    assert [c.strip() for c in row[3:8]] == ["50.0 ± 0.0", "60.0 ± 0.0", "70.0 ± 0.0",
                                             "80.0 ± 0.0 / 70.0 ± 0.0 ‖ 90.0 ± 0.0",
                                             "60.0 ± 0.0 / 50.0 ± 0.0 ‖ 40.0 ± 0.0"]
    xs, ys = mod._curve(r.runs("curves/lambda1/coplms"), "llm/rougeL/mean")
    assert 7 not in xs and len(xs) == 15 and ys[xs.index(10)] == pytest.approx(1.05)
    lines = mod.curves(r, tmp_path)
    row = next(ln for ln in lines if ln.startswith("| Co-PLMs (2) |")).split("|")
    assert row[2].strip() == "5.0 → 15.0 → 55.0 → 105.0 → 155.0"
    assert (tmp_path / "curves.png").stat().st_size > 0


def test_sweep_table_reads_table_1s_row_as_the_default_point(tmp_path):
    """The README's sweep is backed by records: each axis lists its values in order, the default (K = 16, κ = 0.5)
    being Table 1's Co-PLMs row at λ = 1."""
    from fedlab.evidence.runner import Results

    mod = _tables_module()
    r = Results(tmp_path / "results.json")
    for seed in range(2):
        for key, v in (("hetero/lambda1/coplms", 0.5), ("sweep/topk4", 0.4), ("sweep/kappa0.84", 0.6)):
            r.records[f"{key}@{seed}"] = {"key": key, "seed": seed,
                                          "final": {"rougeL/mean": v, "llm/rougeL/mean": v, "bytes/up": 1000.0}}
    lines = [ln for ln in mod.sweep(r) if ln.startswith("| K") or ln.startswith("| κ")]
    assert [ln.split("|")[2:4] for ln in lines] == [[" 4 ", " 40.0 ± 0.0 "], [" 16 ", " 50.0 ± 0.0 "],
                                                    [" 0.5 ", " 50.0 ± 0.0 "], [" 0.84 ", " 60.0 ± 0.0 "]]


@pytest.mark.federation
def test_coplms_exports_the_llm_the_dpm_and_each_devices_slm(hetero_zoo, tmp_path):
    """Without domain adapters every party loads with PEFT with fedlab's logits: the LLM, the DPM over the
    distilled proxy (its base written beside it) and each device's SLM."""
    from cli.test_export import _parties_load_with_fedlabs_logits

    from fedlab.config import load_config
    from fedlab.experiment import run_experiment

    cfg = load_config(None, HETERO + ["federation.rounds=1", "method.dst=false", f"output_dir={tmp_path}/runs"])
    h = run_experiment(cfg, progress=False)
    manifest = _parties_load_with_fedlabs_logits(h.out_dir, tmp_path / "out")
    assert sorted(manifest["parties"]) == ["dpm", "llm", "slm_0", "slm_1", "slm_2"]
    assert {manifest["parties"][f"slm_{c}"]["base_model"] for c in range(3)} == set(SLMS)


def test_device_claims_average_only_the_cells_each_familys_control_learnt(monkeypatch):
    from fedlab.evidence.summary import load_table

    t = load_table("coplms")
    tasks = t.CONTROL_TASKS
    import coplms_claims  # load_table put the table's folder on the import path
    monkeypatch.setattr(coplms_claims, "kept", lambda: {"tiny-gpt2": tasks, "tiny-opt": ("topic",), "tiny-bloom": ()})
    final = {f"rougeL_client_{i}/{task}": 0.1 * (i + 1) + 0.01 * k for i in range(3) for k, task in enumerate(tasks)}
    final["rougeL/mean"] = 0.99
    score = coplms_claims.device_score(("tiny-gpt2", "tiny-opt", "tiny-bloom"))
    # client 0 (tiny-gpt2): all four tasks; client 1 (tiny-opt): topic only; client 2 (tiny-bloom): none
    want = [final[f"rougeL_client_0/{task}"] for task in tasks] + [final["rougeL_client_1/topic"]]
    assert score({"final": final}) == pytest.approx(sum(want) / len(want))
    assert [c.name for c in coplms_claims.devices()] == ["centralized tiny-gpt2", "centralized tiny-opt (topic)"]
    assert coplms_claims.left_out_cells() == {"tiny-opt": ("sentiment", "entailment", "paraphrase"),
                                              "tiny-bloom": tasks}
    monkeypatch.setattr(coplms_claims, "kept", lambda: {f: tasks for f in ("tiny-gpt2", "tiny-opt", "tiny-bloom")})
    assert coplms_claims.device_score()({"final": final}) == 0.99      # nothing left out: the mean over clients


def test_the_readme_states_how_many_items_each_device_is_tested_on():
    """The method page's setup paragraph quotes the tables' `data.client_test_per_task` (experiments/coplms/base.yaml)."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    cfg = load_config(str(root / "experiments/coplms/hetero.yaml"))
    text = " ".join((root / "fedlab/methods/coplms/README.md").read_text().split())
    said = re.search(r"Each device is tested on (\d+) items per task", text)
    assert said and int(said.group(1)) == cfg.data.client_test_per_task


def test_the_smollm2_tables_rows_run_at_the_rates_its_own_grids_chose(monkeypatch):
    """Before budget.py's real grids choose, every SmolLM2-table row runs at hetero_smollm2.yaml's rate; once
    they have, the devices (and the device controls) run at the devices' rate, SmolLM2's control at the server's,
    and FedCoLLM's and Co-PLMs' server LLM at the server's through `method.server_lr`; Standalone has no server."""
    from fedlab.evidence.summary import load_table

    t = load_table("coplms")
    import coplms_rows  # load_table put the table's folder on the import path

    real = lambda: {p.key: p.resolve(0) for p in t.plan() if p.key.startswith("real/")}
    monkeypatch.setattr(coplms_rows, "real_rates", lambda: {})
    before = real()
    assert {c.federation.lr for c in before.values()} == {0.0005}
    assert before["real/hetero/coplms"].method.server_lr is None
    assert sorted(k for k in before if k.startswith("real/control/")) == [
        f"real/control/{m}/centralized" for m in sorted(("smollm2-135m", *t.hetero_devices()))]
    assert before["real/control/tiny-opt/centralized"].model.name == "tiny-opt"
    monkeypatch.setattr(coplms_rows, "real_rates", lambda: {"devices": "0.005", "server": "0.001"})
    after = real()
    assert after["real/control/smollm2-135m/centralized"].federation.lr == 0.001
    for key in ("real/hetero/standalone", "real/hetero/fedcollm", "real/hetero/coplms",
                *(f"real/control/{f}/centralized" for f in t.hetero_devices())):
        assert after[key].federation.lr == 0.005, key
    assert after["real/hetero/coplms"].method.server_lr == after["real/hetero/fedcollm"].method.server_lr == 0.001
    monkeypatch.setattr(coplms_rows, "real_rates", lambda: {"devices": "0.005"})     # the server's not chosen yet
    half = real()
    assert half["real/hetero/coplms"].federation.lr == 0.005
    assert half["real/hetero/coplms"].method.server_lr == half["real/hetero/fedcollm"].method.server_lr == 0.0005
    assert half["real/control/smollm2-135m/centralized"].federation.lr == 0.0005


def test_the_smollm2_tables_rates_and_cells_are_read_from_its_own_grids(monkeypatch):
    """`real_rates` names each grid's choice by its grid (`real_devices` → devices, `real_server` → server), and
    `real_kept` reads the cells learnt under the very names budget.py's device controls carry."""
    from fedlab.evidence import budget
    from fedlab.evidence.summary import load_table

    t = load_table("coplms")
    import coplms_claims
    import coplms_rows

    grids = {"real_devices": budget.Grid("federation.lr", ("0.002",), (), lambda prefix: [])}
    monkeypatch.setattr(budget, "chain_of", lambda folder, script="budget", chain=None:
                        ("records", [grids[chain]]) if chain in grids else None)
    monkeypatch.setattr(budget, "chosen", lambda r, grid: "0.002" if grid is grids["real_devices"] else None)
    coplms_rows.real_rates.cache_clear()
    try:
        assert coplms_rows.real_rates() == {"devices": "0.002"}
    finally:
        coplms_rows.real_rates.cache_clear()
    b = load_table("coplms", script="budget")
    names = [c.name for c in b.real_devices()[0].controls("lr0.0005/")]
    assert names == [f"centralized {f} (SmolLM2 table)" for f in t.hetero_devices()]
    monkeypatch.setattr(budget, "learnt_in", lambda folder, script="budget", chain=None:
                        {names[0]: ("topic",)} if chain == "real_devices" else {})
    coplms_claims.real_kept.cache_clear()
    try:
        got = coplms_claims.real_kept()
    finally:
        coplms_claims.real_kept.cache_clear()
    assert got == {t.hetero_devices()[0]: ("topic",), **{f: t.CONTROL_TASKS for f in t.hetero_devices()[1:]}}


def test_the_smollm2_tables_device_claims_rest_on_the_device_controls_at_its_budget(monkeypatch):
    """The SmolLM2 table's device claims read the cells its own device controls learnt on validation
    (`real_kept`) and rest on those controls (rows `real/control/<family>/centralized`), not on Table 1's."""
    from fedlab.evidence.summary import load_table

    t = load_table("coplms")
    import coplms_claims  # load_table put the table's folder on the import path

    tasks = t.CONTROL_TASKS
    monkeypatch.setattr(coplms_claims, "real_kept",
                        lambda: {"tiny-gpt2": ("topic",), "tiny-opt": tasks, "tiny-bloom": ()})
    monkeypatch.setattr(coplms_claims, "kept", lambda: {f: tasks for f in (*t.FAMILIES, *t.hetero_devices())})
    claims = {c.claim: c for c in coplms_claims.claims() if c.claim.startswith("SmolLM2:")}
    device = claims["SmolLM2: Co-PLMs above Standalone (heterogeneous devices)"]
    assert [(c.name, c.rows) for c in device.controls()] == [
        ("centralized tiny-gpt2 (SmolLM2 table; topic)", ("real/control/tiny-gpt2/centralized",)),
        ("centralized tiny-opt (SmolLM2 table)", ("real/control/tiny-opt/centralized",))]
    final = {f"rougeL_client_{i}/{task}": 0.1 * (i + 1) + 0.01 * k for i in range(3) for k, task in enumerate(tasks)}
    want = [final["rougeL_client_0/topic"]] + [final[f"rougeL_client_1/{task}"] for task in tasks]
    assert device.fn({"final": final}) == pytest.approx(sum(want) / len(want))
    assert t.left_out_cells(real=True) == {"tiny-gpt2": ("sentiment", "entailment", "paraphrase"),
                                           "tiny-bloom": tasks}
    table1 = [c for c in coplms_claims.claims() if c.claim.startswith("λ=1: Co-PLMs above Standalone")][0]
    assert all(not r.startswith("real/") for c in table1.controls() for r in c.rows)


def test_the_smollm2_tables_grids_score_its_references_at_its_budget_on_held_validation_rows():
    """budget.py's real grids: the device families' and SmolLM2's centralized controls at hetero_smollm2.yaml's
    budget, the rows' present rate first (a tie keeps it), scored on held validation rows in the test sets'
    answer shares, the training rows refilled (every row trains on the table's rows)."""
    from fedlab.config import load_config
    from fedlab.evidence.summary import load_table

    b = load_table("coplms", script="budget")
    (devices,), (server,) = b.real_devices(), b.real_server()
    assert [p.key for p in devices.rows] == [f"real/control/{f}/centralized" for f in b.TABLES.hetero_devices()]
    assert [p.key for p in server.rows] == ["real/control/smollm2-135m/centralized"]
    cfg = load_config(str(b.HERE / "hetero_smollm2.yaml"))
    for g in (devices, server):
        assert g.values[0] == str(cfg.federation.lr)
        held = dict(o.split("=") for o in g.validation)
        assert held["data.evaluate_on"] == "validation" and held["data.validation_from"] == "held"
        assert held["data.validation_refills_train"] == held["data.validation_holdout_keeps_shares"] == "true"
    keys = [p.key for p in b.plan()]
    assert "lr0.005/real/control/tiny-opt/centralized" in keys and "lr0.001/real/control/smollm2-135m/centralized" in keys
