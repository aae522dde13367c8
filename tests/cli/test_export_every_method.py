"""Every registered method's run exports what it trained: each party `fedlab export` writes loads with PEFT or
transformers and gives the logits of fedlab's own model (`test_export._parties_load_with_fedlabs_logits`); a
method that trains nothing says so in one line. Each method runs on the pico setting of the regression matrix
(`experiments/regression/method_matrix.py`), so this is the slow tier's: about a minute and a half in all."""
from __future__ import annotations

from pathlib import Path

import pytest
from test_export import _parties_load_with_fedlabs_logits

from fedlab import registry
from fedlab.cli import main
from fedlab.evidence.summary import load_table

matrix = load_table("regression", script="method_matrix")


# methods whose pico setting differs from the matrix's: an encoder for ELSA; an SLM sharing the LLM's tokenizer
# where the LLM is proxy-tuned by it
OWN = {"elsa": ("model.name=pico-bert", "model.lora.target_modules=[query,value]", "data.tasks=[sentiment,topic]",
                "method.warmup_steps=2", "method.probe_size=8", "method.num_edges=2"),
       "llm_fedavg": ("model.name=pico-llama-s", "method.llm=pico-llama"),
       "llm_fedmoe": ("model.name=pico-llama-s", "method.llm=pico-llama")}


@pytest.mark.federation
@pytest.mark.slow
@pytest.mark.parametrize("method", registry.method_names())
def test_every_registered_method_exports_loadable_parties(pico_zoo, tmp_path, method, capsys):
    from fedlab.config import load_config
    from fedlab.experiment import run_experiment
    from fedlab.export import method_of_run, writes_anything

    cfg = load_config(None, [*matrix.PICO, f"method.name={method}", *matrix.method_extra("pico", method),
                             *OWN.get(method, ()), "federation.rounds=1", "tracking.enabled=false",
                             f"output_dir={tmp_path}/runs"])
    h = run_experiment(cfg, progress=False)
    if not (Path(h.out_dir) / "checkpoint.pt").exists():          # a method that only evaluates
        capsys.readouterr()
        assert main(["export", h.out_dir, "--to", str(tmp_path / "out")]) == 2
        assert "the run trained no model to export" in capsys.readouterr().err
        return
    exported = method_of_run(h.out_dir)
    assert writes_anything(exported)
    manifest = _parties_load_with_fedlabs_logits(Path(h.out_dir), tmp_path / "out")
    assert manifest["parties"] or manifest.get("files")
