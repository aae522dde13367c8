"""FedMKT: DualMinCE, sparse distillation targets, knowledge messages, the method end to end
with four different SLM families, LLM2SLM, and the config rules for heterogeneous clients."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from conftest import PICO
from fedlab.comm.knowledge import num_positions, pack_knowledge, paper_estimate, sample_topk
from fedlab.config import ConfigError, load_config
from fedlab.objectives import dual_min_ce, sparse_soft_cross_entropy

SLMS = ["pico-gpt2", "pico-opt", "pico-bloom", "pico-qwen2"]
HETERO = PICO + ["method.name=fedmkt", f"model.clients=[{','.join(SLMS)}]", "data.num_clients=4",
                 "data.partition=iid", "data.public_source=holdout", "data.tasks=[recall,sentiment]",
                 "data.train_per_task=40", "data.test_per_task=12", "tracking.enabled=false"]


def test_dual_min_ce_chooses_the_best_teacher_per_sample():
    teachers = torch.tensor([[0.5, 2.0, 3.0, 1.0],
                             [0.9, 1.0, 2.5, 1.0],      # ties with teacher 0 on sample 3: lower index wins
                             [0.7, 3.0, 0.2, 4.0]])
    local = torch.tensor([1.0, 0.5, 0.3, 2.0])
    keep, which = dual_min_ce(teachers, local)
    assert which.tolist() == [0, 1, 2, 0]
    # kept iff the chosen teacher's loss is below the local loss (strictly)
    assert keep.tolist() == [True, False, True, True]
    # the client side: one teacher (the LLM)
    keep1, which1 = dual_min_ce(torch.tensor([0.4, 0.6]), torch.tensor([0.5, 0.5]))
    assert keep1.tolist() == [True, False] and which1.tolist() == [0, 0]


def test_sparse_soft_cross_entropy_equals_the_dense_computation():
    torch.manual_seed(0)
    logits = torch.randn(2, 5, 30, requires_grad=True)
    ids = torch.randint(0, 30, (2, 5, 4))
    ids[..., 1] = (ids[..., 0] + 1) % 30          # distinct ids per position
    ids[..., 2] = (ids[..., 0] + 2) % 30
    ids[..., 3] = (ids[..., 0] + 3) % 30
    probs = torch.softmax(torch.randn(2, 5, 4), -1)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)
    got = sparse_soft_cross_entropy(logits, ids, probs, mask)
    dense = torch.zeros(2, 5, 30).scatter(-1, ids, probs)
    per_pos = -(dense * F.log_softmax(logits, -1)).sum(-1)
    want = per_pos[mask].mean()
    assert torch.allclose(got, want, atol=1e-6)
    got.backward()
    assert logits.grad[0, 4].abs().sum() == 0      # masked positions get no gradient


def test_knowledge_messages_are_ragged_and_counted():
    ids = [torch.randint(0, 100, (n, 4)) for n in (3, 7, 5)]
    logits = [torch.randn(n, 4).sort(descending=True).values for n in (3, 7, 5)]
    k = pack_knowledge(torch.tensor([1.0, 2.0, 3.0]), ids, logits)
    assert k["offsets"].tolist() == [0, 3, 10, 15] and num_positions(k) == 15
    got_ids, got_logits = sample_topk(k, 1)
    assert torch.equal(got_ids, ids[1]) and torch.allclose(got_logits, logits[1])
    from fedlab.comm.messages import FitRes
    res = FitRes(0, 1, None, 10, {}, aux=k)
    assert res.nbytes() == 3 * 4 + 4 * 8 + 15 * 4 * (4 + 4) + 8       # loss + offsets + ids + logits + count
    half = pack_knowledge(torch.zeros(3), ids, logits, torch.float16)
    assert half["logits"].dtype == torch.float16
    assert paper_estimate(1000, 512, 16) == 8_192_000               # Appendix C: "8M floats"


@pytest.fixture(scope="module")
def hetero_zoo(pico_zoo):
    from fedlab.models import zoo

    for name in SLMS:
        zoo.build(name, progress=False)
    return pico_zoo


def _run(tmp_path, *extra):
    from fedlab.experiment import run_experiment

    return run_experiment(load_config(None, HETERO + [f"output_dir={tmp_path}/runs", *extra]), progress=False)


@pytest.mark.federation
def test_fedmkt_heterogeneous_end_to_end(hetero_zoo, tmp_path):
    h = _run(tmp_path)
    r0, r1, r2 = h.rounds
    # the LLM and every SLM are evaluated every round, round 0 included
    for r in (r0, r1, r2):
        assert "llm/acc/mean" in r and all(f"acc/client_{c}" in r for c in range(4))
    # selection rates of both sides are logged
    for key in ("server/server_kept", "server/client_kept", *[f"server/client_kept_client_{c}" for c in range(4)]):
        assert key in r1
    assert abs(sum(r1[f"server/chosen_client_{c}"] for c in range(4)) - r1["server/server_kept"]) < 1e-9
    # knowledge, not weights: the upload is the ragged top-K of the public set
    n_public = 2 * 8   # holdout: a fifth of 40 per task
    positions = r1["server/knowledge_positions"]
    assert positions < 4 * n_public * 64
    assert r1["server/paper_estimate_floats"] == n_public * 64 * 16
    assert positions * 16 * 8 < r1["bytes/up"] < positions * 16 * 8 + 4000
    # the LLM's adapter moved (it learnt from the clients) and the SLMs' adapters too
    assert r2["llm/acc/mean"] != r0["llm/acc/mean"] or r2["server/llm_kd_loss"] > 0
    assert any(r2[f"acc/client_{c}"] != r0[f"acc/client_{c}"] for c in range(4))


@pytest.mark.federation
def test_fedmkt_same_numbers_on_both_backends(hetero_zoo, tmp_path):
    a = _run(tmp_path / "a", "federation.rounds=1")
    b = _run(tmp_path / "b", "federation.rounds=1", "backend.name=ray", "backend.num_cpus=2")
    for key in ("acc/mean", "llm/acc/mean", "loss/task", "distill/kd", "server/server_kept", "bytes/up"):
        assert a.rounds[-1][key] == pytest.approx(b.rounds[-1][key], rel=1e-6), key


@pytest.mark.federation
def test_llm2slm_keeps_the_llm_frozen(hetero_zoo, tmp_path):
    h = _run(tmp_path, "method.name=llm2slm", "model.clients=[pico-opt]", "data.num_clients=1")
    assert h.rounds[0]["llm/acc/mean"] == h.rounds[-1]["llm/acc/mean"]
    assert "server/server_kept" not in h.rounds[1]          # nothing is distilled into the LLM
    assert h.rounds[1]["bytes/up"] < 1000                    # clients upload no knowledge


@pytest.mark.parametrize("override, needle", [
    (["model.clients=[pico-gpt2,pico-opt]"], "model.clients"),                       # 2 names, 4 clients
    (["method.name=fedavg"], "different client models are allowed with"),
    (["method.client_lr=[0.1]"], "method.client_lr"),
    (["method.selection=best"], "method.selection"),
    (["data.public_fraction=1.5"], "data.public_fraction"),
])
def test_bad_fedmkt_configs_name_the_key(override, needle):
    with pytest.raises(ConfigError, match=needle):
        load_config(None, HETERO + override)


def test_holdout_public_set_is_a_labelled_fifth_of_each_task():
    from fedlab.data.federated import build_federated_data

    cfg = load_config(None, HETERO)
    data = build_federated_data(cfg.data, cfg.seed)
    assert len(data.public) == 16 and sum(data.sizes()) == 64
    assert {e.task for e in data.public} == {"recall", "sentiment"}
    assert all(e.target for e in data.public)            # labelled: L2's λ·CE(labels) has targets


@pytest.mark.federation
def test_standalone_accepts_the_uploads_of_heterogeneous_clients(hetero_zoo, tmp_path):
    h = _run(tmp_path, "method.name=standalone", "federation.rounds=1")
    assert h.rounds[1]["rejected"] == 0 and h.rounds[1]["clients/ok"] == 4


def test_the_selection_score_is_the_summed_answer_nll_whatever_the_tokenizer():
    """A coarse tokenizer's one answer token at p = 1/4 and a fine one's two tokens at p = 1/2
    each give the answer the same probability, so the same score ln 4; a per-token mean would give the fine
    tokenizer ln 2 and make it win DualMinCE."""
    import math

    from fedlab.objectives.terms import per_sample_target_ce, per_sample_target_nll

    def logits_for(probs):           # [1, S, V]: position s puts probs[s] on token 1
        rows = [torch.log(torch.tensor([(1 - p) / 3] * 1 + [p] + [(1 - p) / 3] * 2)) for p in probs]
        return torch.stack(rows)[None]
    coarse_labels = torch.tensor([[-100, 1]])             # prompt token, then one answer token
    fine_labels = torch.tensor([[-100, 1, 1]])            # prompt token, then two answer tokens
    coarse = per_sample_target_nll(logits_for([0.25, 0.9]), coarse_labels)
    fine = per_sample_target_nll(logits_for([0.5, 0.5, 0.9]), fine_labels)
    assert float(coarse) == pytest.approx(math.log(4)) and float(fine) == pytest.approx(math.log(4))
    assert float(per_sample_target_ce(logits_for([0.5, 0.5, 0.9]), fine_labels)) == pytest.approx(math.log(2))


def test_every_public_sample_carries_the_task_loss_and_only_the_selected_carry_kd(pico_zoo):
    from fedlab.data.tasks import task_examples
    from fedlab.knowledge import Aligner, PublicSet, distill_items, kept_by_task, public_knowledge
    from fedlab.models.zoo import load_model, load_tokenizer

    examples = task_examples("friend", "train", 3) + task_examples("sentiment", "train", 3)
    student = PublicSet(load_tokenizer("pico-llama"), examples, 48)
    teacher_model, teacher_tok = load_model("pico-gpt2")
    teacher = PublicSet(teacher_tok, examples, 48)
    knowledge = public_knowledge(teacher_model, teacher, 4)
    from fedlab.align import cached_vocab_map

    vmap = cached_vocab_map(teacher_tok, load_tokenizer("pico-llama"))
    items = distill_items(Aligner(student), {1: ("t", teacher, knowledge), 4: ("t", teacher, knowledge)},
                          {"t": vmap}, 1.0, "target", 4)
    assert len(items) == 6 and [bool(it["kd_mask"].any()) for it in items] == [False, True, False, False, True, False]
    assert all(it["kd_ids"].shape == (len(it["input_ids"]), 4) for it in items)
    assert kept_by_task(student, [False, True, False, False, True, True]) == {"friend": 1 / 3, "sentiment": 2 / 3}
    # generative answers end with EOS on both sides: the positions predicting the end pair too
    assert student.ends[0] and teacher.ends[0] and not student.ends[3]
    pairs = Aligner(student).pairs("t", teacher, 0)
    assert (len(teacher.tokens[0]) - 2, len(student.tokens[0]) - 2) in pairs
