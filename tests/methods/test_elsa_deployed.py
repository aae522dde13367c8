"""ELSA as deployed and able to learn: the split path that is scored equals the
pipeline with a live edge; Vanilla learns an iid pico task and its split and full accuracies agree; SS-OP alone
stays near Vanilla; the link's codec (fixed / per-step hashes, the noise control of the sketch's MSE); Simple
SL's one shared θ₂; local work scaled to the client's data; the data constraints (every client two batches,
mislabeled clients among the multi-class ones); trust against label entropy."""
from __future__ import annotations

import math

import pytest
import torch

from fedlab.config import load_config

BASE = ["model.name=pico-bert", "model.lora.target_modules=[query,value]", "model.lora.dropout=0",
        "model.max_length=32", "data.tasks=[sentiment,topic]", "data.num_clients=4", "data.train_per_task=24",
        "data.test_per_task=8", "federation.batch_size=4", "federation.rounds=1", "method.name=elsa",
        "method.num_edges=2", "method.rho_steps=2", "method.warmup_steps=2", "method.probe_size=8",
        "method.w_excl=0", "method.w_min=0", "tracking.enabled=false"]
# an iid pico task the uncompressed split model learns in seconds (0.55–0.66 over seeds 0–1; chance 0.25)
LEARN = ["model.name=pico-bert", "model.lora.target_modules=[query,value]", "model.lora.dropout=0",
         "model.max_length=32", "data.tasks=[topic]", "data.partition=iid", "data.num_clients=2",
         "data.train_per_task=256", "data.test_per_task=64", "federation.batch_size=8", "federation.rounds=4",
         "federation.lr=0.02", "method.name=elsa", "method.num_edges=1", "method.local_epochs=4",
         "method.warmup_steps=2", "method.probe_size=8", "method.w_excl=0", "method.w_min=0", "method.ratio=1",
         "method.ssop_rank=0", "eval.every=2", "tracking.enabled=false"]


@pytest.fixture()
def bert_home(fedlab_home):
    from fedlab.models import zoo

    zoo.build("pico-bert", progress=False)
    return fedlab_home


def _cfg(tmp_path, *extra, base=BASE):
    return load_config(None, [*base, f"output_dir={tmp_path}/runs", *extra])


def test_the_scored_split_path_is_the_pipeline_with_a_live_edge(bert_home, tmp_path):
    """Logits of the whole model under `split_path` (rotation + sketch at both cuts, θ₂ of the state) equal
    those of the client's view talking to an edge that holds the same θ₂; without the hooks they differ."""
    from fedlab.comm import ssop_matrix
    from fedlab.data.federated import build_federated_data
    from fedlab.methods.elsa.chains import client_chain, cuts, full_chain, label_space, task_classes
    from fedlab.methods.elsa.client import ClassCollator, ClassExamples
    from fedlab.methods.elsa.deployed import split_path
    from fedlab.methods.elsa.edge import ClientLink, EdgeHandle, EdgeServer, link_codec
    from fedlab.methods.elsa.model import root_of
    from fedlab.runtime import parties
    from fedlab.runtime.resident import clear_residents, get_resident
    from fedlab.transforms import set_state

    cfg = _cfg(tmp_path, "method.ratio=2.1", "method.ssop_rank=4")
    clear_residents()
    data = build_federated_data(cfg.data, cfg.seed)
    full = get_resident(cfg, chain=full_chain(cfg))
    client = get_resident(cfg, chain=client_chain(cfg))
    g = torch.Generator().manual_seed(3)
    state = {k: v + 0.05 * torch.randn(v.shape, generator=g) for k, v in full.init_state.items()}
    set_state(full.model, state)
    set_state(client.model, {k: state[k] for k in client.spec.communicated})
    full.model.eval()
    client.model.eval()
    edge = EdgeServer(cfg, 0)
    edge.start(1, state, [0])
    ds = ClassExamples(full.tokenizer, list(data.train[0][:6]), label_space(data), task_classes(data), 32)
    batch = ClassCollator(full.tokenizer.pad_token_id, ds.num_labels)([ds[i] for i in range(len(ds))])
    d = full.model.config.hidden_size
    q = ssop_matrix(torch.randn(40, d, generator=torch.Generator().manual_seed(5)), 4, seed=11)
    codec = link_codec(cfg, 0, d)
    args = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}
    parties.put("t", edge)
    try:
        root_of(client.model).link = ClientLink(EdgeHandle("t"), 0, link_codec(cfg, 0, d), q, rnd=1)
        with torch.no_grad():
            live = client.model(**args).logits
    finally:
        root_of(client.model).link = None
        parties.stop(["t"])
    with torch.no_grad():
        with split_path(full.model, cuts(cfg), codec, q, 1) as cos:
            scored = full.model(**args).logits
        whole = full.model(**args).logits
    torch.testing.assert_close(scored, live, atol=1e-5, rtol=1e-4)
    assert (whole - live).abs().max() > 1e-3          # the hooks do change what the whole model computes
    assert len(cos) == 1 and 0 < cos[0] < 0.99        # ρ = 2.1 loses information: cosine well below 1
    # an identity link (ρ = 1, no SS-OP) is the whole model's computation bit for bit (evaluation skips it)
    raw = link_codec(_cfg(tmp_path, "method.ratio=1"), 0, d)
    with torch.no_grad(), split_path(full.model, cuts(cfg), raw, None, 1):
        assert torch.equal(full.model(**args).logits, whole)


@pytest.mark.federation
def test_the_uncompressed_split_model_learns_an_iid_pico_task_and_ssop_alone_stays_near_it(bert_home, tmp_path):
    """Positive control: Vanilla (ρ = 1, no SS-OP) ends ≥ 0.25 above chance (topic: 0.25); its link is the identity,
    so its split path is scored by the whole model's computation (the test above shows the two agree bit for bit)
    and the two accuracies are one number. SS-OP alone (a rotation, no information lost) is scored on its own
    split path, which differs from the unrotated whole model's at some evaluation (θ₂ learnt rotated inputs),
    and ends within 0.15 of Vanilla."""
    from fedlab.data.tasks import TASKS
    from fedlab.experiment import run_experiment

    h = run_experiment(_cfg(tmp_path / "a", base=LEARN), progress=False)
    vanilla = h.final["acc/mean"]
    assert vanilla >= TASKS["topic"].chance + 0.25, vanilla
    evals = [r for r in h.rounds if "acc/mean" in r]
    assert len(evals) >= 2 and all(r["acc/mean"] == r["full/acc/mean"] for r in evals)
    assert "link/cosine" not in h.final           # raw floats: nothing to reconstruct
    assert 0 < h.final["top/task_topic"] < 1.0     # the split path's most frequent answer: not one constant
    rotated = run_experiment(_cfg(tmp_path / "b", "method.ssop_rank=4", base=LEARN), progress=False)
    scored = [(r["acc/mean"], r["full/acc/mean"]) for r in rotated.rounds if "acc/mean" in r]
    assert any(a != f for a, f in scored), scored   # θ₂ learnt rotated inputs: the split path is not the whole model
    ssop = rotated.final["acc/mean"]
    assert abs(vanilla - ssop) <= 0.15, (vanilla, ssop)


def test_the_codec_per_step_hashes_and_the_noise_control(tmp_path):
    from fedlab.methods.elsa.codec import LinkCodec

    def codec(*extra):
        return LinkCodec(_cfg(tmp_path, "method.ratio=2.1", *extra), cid=3, dim=32)

    x = torch.randn(4, 5, 32, generator=torch.Generator().manual_seed(0))
    fixed, per_step = codec(), codec("method.sketch_hashes=per_step")
    assert fixed.sketch(1, 0) is fixed.sketch(2, 7)
    assert not torch.equal(per_step.sketch(1, 0).buckets, per_step.sketch(1, 1).buckets)
    other_end = codec("method.sketch_hashes=per_step")          # the edge builds the same sketch per step
    torch.testing.assert_close(other_end.unpack(per_step.pack(x, 1, 1, "t"), 1, 1), per_step.through(x, 1, 1, "t"))
    assert fixed.compresses and math.isclose(fixed.ratio, 32 / fixed.sketch(0, 0).rows / fixed.sketch(0, 0).cols)
    noise = codec("method.link_codec=noise")
    assert not noise.compresses and noise.ratio == 1.0
    wire = noise.pack(x, 1, 0, "act-up")
    assert wire.shape == x.shape                                 # raw floats on the wire
    sketch_mse = float((fixed.through(x, 1, 0, "t") - x).pow(2).mean())
    noise_mse = float((noise.unpack(wire, 1, 0) - x).pow(2).mean())
    assert noise_mse == pytest.approx(sketch_mse, rel=0.1)
    assert torch.equal(noise.pack(x, 1, 0, "act-up"), wire)      # seeded
    assert not torch.equal(noise.pack(x, 1, 0, "grad-up"), wire)  # each transfer draws its own noise


@pytest.mark.federation
def test_simple_sl_trains_one_shared_theta2_and_differs_from_fedavg(bert_home, tmp_path):
    from fedlab.experiment import run_experiment
    from fedlab.methods.elsa.edge import EdgeServer
    from fedlab.methods.elsa.method import Elsa

    cfg = _cfg(tmp_path, "method.grouping=single", "method.aggregation=sizes")
    edge = EdgeServer(cfg, 0)
    from fedlab.methods.elsa.chains import full_chain
    from fedlab.runtime.resident import get_resident

    state = get_resident(cfg, chain=full_chain(cfg)).init_state
    edge.start(1, state, [0, 1, 2], shared=True)
    assert edge.params[0] is edge.params[2] and edge.opts[0] is edge.opts[1]
    edge.start(1, state, [0, 1, 2])
    assert edge.params[0] is not edge.params[2]

    kept = {}
    original = Elsa.finalize

    def keep(self, ctx):
        kept[self.cfg.method.grouping] = {k: v.clone() for k, v in self.global_state.items()
                                          if k in self.middle_keys}
        return original(self, ctx)

    from fedlab.methods.elsa import method as elsa_method

    turns = {}                     # grouping → whether the round's link time added the clients' (they take turns)
    timed = elsa_method.round_seconds

    def record(per_client, sequential=False):
        turns.setdefault("current", set()).add(sequential)
        return timed(per_client, sequential)

    Elsa.finalize = keep
    elsa_method.round_seconds = record
    try:
        sl = run_experiment(cfg, progress=False)
        turns["single"] = turns.pop("current")
        run_experiment(_cfg(tmp_path / "f", "method.grouping=nearest", "method.aggregation=sizes"), progress=False)
        turns["nearest"] = turns.pop("current")
    finally:
        Elsa.finalize = original
        elsa_method.round_seconds = timed
    assert turns == {"single": {True}, "nearest": {False}}      # Simple SL's clients queue for the cloud
    # θ₂ differs by far more than float rounding could make it (0.010 when written): sequential steps on one
    # θ₂ against per-edge copies averaged
    gap = max(float((kept["single"][k] - kept["nearest"][k]).abs().max()) for k in kept["single"])
    assert gap > 1e-3, gap
    # its link time counts two round trips a step to the cloud, which lies cloud_km away
    assert sl.rounds[1]["server/link_latency_seconds"] > 0


def test_local_work_scales_with_the_clients_data(tmp_path):
    from fedlab.methods.elsa.client import split_steps

    m = _cfg(tmp_path, "method.local_epochs=1.5").method
    assert [split_steps(m, n, 16) for n in (1, 16, 32, 100)] == [1, 2, 3, 10]
    assert split_steps(_cfg(tmp_path).method, 100, 16) == 2      # rho_steps when local_epochs is null


def test_every_client_holds_two_batches_and_mislabeled_clients_hold_two_classes(tmp_path):
    from fedlab.data.federated import build_federated_data, second_class_share

    over = ["data.tasks=[sentiment]", "data.partition=dirichlet_label_quantity", "data.alpha=0.1",
            "data.num_clients=20", "data.train_per_task=800"]
    skewed = build_federated_data(_cfg(tmp_path, *over).data, 0)
    assert min(skewed.sizes()) < 16                              # the skew alone leaves tiny clients
    cfg = _cfg(tmp_path, *over, "data.min_client_samples=32", "data.mislabeled_count=4")
    data = build_federated_data(cfg.data, 0)
    assert min(data.sizes()) >= 32 and sum(data.sizes()) == 800
    assert len(data.mislabeled) == 4
    clean = build_federated_data(_cfg(tmp_path, *over, "data.min_client_samples=32").data, 0)
    for c in data.mislabeled:                                    # chosen on the clean labels: two classes each
        assert second_class_share(clean.train[c]) >= 0.1
        assert any(e.meta.get("mislabeled") for e in data.train[c])
    assert not any(e.meta.get("mislabeled") for c in range(20) if c not in data.mislabeled for e in data.train[c])


def test_trust_against_label_entropy_by_hand():
    from types import SimpleNamespace as E

    import numpy as np

    from fedlab.methods.elsa.method import label_entropy, trust_entropy_spearman

    one = [E(task="t", target="a")] * 4
    half = [E(task="t", target="a")] * 2 + [E(task="t", target="b")] * 2
    third = [E(task="t", target=c) for c in "abc"]
    assert label_entropy(one) == 0.0 and label_entropy(half) == pytest.approx(math.log(2))
    assert trust_entropy_spearman(np.array([0.1, 0.5, 0.9]), [one, half, third]) == pytest.approx(1.0)
    assert trust_entropy_spearman(np.array([0.9, 0.5, 0.1]), [one, half, third]) == pytest.approx(-1.0)
    assert math.isnan(trust_entropy_spearman(np.array([0.5, 0.5, 0.5]), [one, half, third]))


@pytest.mark.federation
@pytest.mark.slow
def test_trust_ranks_the_flipped_clients_lowest_on_an_iid_split(tmp_path):
    """The trust positive control (fedlab/methods/elsa/README.md: on an iid split the mislabeled clients
    must rank lowest) at the table's scale: tiny-bert, 20 clients on an iid topic split, 4 of them with half
    their labels flipped, in-domain probes (Q = 256), the prediction fingerprint after 128 warm-up steps
    compared probe by probe (`method.divergence=paired`). Only the flipped labels set those 4 apart, so they
    must be the 4 least trusted (`experiments/elsa/make_tables.py --only
    trust/indomain/iid/predictions_paired/`); a divergence that stops pairing the probes, or a fingerprint that
    stops seeing the warmed-up model, loses that."""
    from fedlab.experiment import run_experiment

    over = ["data.tasks=[topic]", "data.partition=iid", "data.public_source=holdout", "data.public_fraction=0.2",
            "method.probe_size=256", "method.fingerprint=predictions", "method.divergence=paired",
            "method.warmup_steps=128", "federation.rounds=0", "tracking.enabled=false", f"output_dir={tmp_path}/runs",
            "seed=0"]
    from pathlib import Path

    cfg = load_config(Path(__file__).resolve().parents[2] / "experiments/elsa/dirichlet.yaml", over)
    final = run_experiment(cfg, progress=False).final
    assert final["server/trust/recall_at_m"] == 1.0, final["server/trust/recall_at_m"]
    assert final["server/trust/auc_low"] == 1.0, final["server/trust/auc_low"]
    # the paired divergence term alone does it too (the entropy term alone would pass the two lines above)
    assert final["server/trust/recall_at_m_divergence"] == 1.0, final["server/trust/recall_at_m_divergence"]
