"""`fedlab export RUN --to DIR`: a run's trained model as a PEFT adapter folder and a merged Hugging Face folder that
PEFT and transformers load with the logits of fedlab's own model in memory, and a manifest naming the base."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from conftest import PICO
from fedlab.cli import main

ROOT = Path(__file__).resolve().parents[2]
RUN = [*PICO, "federation.rounds=1", "data.num_clients=2", "data.tasks=[recall,sentiment]", "method.name=fedavg",
       "tracking.enabled=false"]


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory, pico_zoo):
    import contextlib
    import io

    tmp = tmp_path_factory.mktemp("export")
    with contextlib.chdir(tmp), contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert main(["run", str(ROOT / "experiments/defaults.yaml"), *RUN, f"output_dir={tmp}/runs"]) == 0
    return next((tmp / "runs").iterdir())


@pytest.mark.federation
def test_the_exported_adapter_and_merged_model_give_fedlabs_logits(trained_run, tmp_path):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from fedlab.export import method_of_run
    from fedlab.transforms.lora import set_state

    assert main(["export", str(trained_run), "--to", str(tmp_path / "out"), "--merged"]) == 0
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    entry = manifest["parties"]["model"]
    assert entry["base_model"] == "pico-llama" and len(entry["base_sha256"]) == 64
    # fedlab's own model in memory: the run's method with its checkpointed state
    method = method_of_run(trained_run)
    res = method.resident
    set_state(res.model, method.final_adapters())
    ids = res.tokenizer(["Who lives in Paris?", "The review says: good"], return_tensors="pt", padding=True)
    with torch.no_grad():
        ours = res.model(**ids).logits
        base = AutoModelForCausalLM.from_pretrained(tmp_path / "out" / entry["base"])
        peft = PeftModel.from_pretrained(base, tmp_path / "out" / entry["adapter"]).eval()
        theirs = peft(**ids).logits
        merged = AutoModelForCausalLM.from_pretrained(tmp_path / "out" / entry["merged"]).eval()(**ids).logits
    assert (theirs - ours).abs().max() < 1e-6 and (merged - ours).abs().max() < 1e-5
    # the trained adapters are not the initial ones: the export carries what the run learnt
    assert any((method.final_adapters()[k] != res.init_state[k]).any() for k in res.init_state)
    config = json.loads((tmp_path / "out" / "model" / "adapter_config.json").read_text())
    assert (tmp_path / "out" / "model" / config["base_model_name_or_path"]).resolve() == \
        (tmp_path / "out" / entry["base"]).resolve()


def test_export_refuses_what_is_not_a_run_in_one_line(tmp_path, capsys):
    (tmp_path / "file").write_text("")
    assert main(["export", str(tmp_path), "--to", str(tmp_path / "x")]) == 2
    assert "is not a finished run's folder" in capsys.readouterr().err
    assert main(["export", "nope", "--to", str(tmp_path / "x")]) == 2
    assert "neither a run folder nor an MLflow run id" in capsys.readouterr().err


@pytest.mark.federation
def test_a_tracked_run_logs_its_model_as_a_peft_folder_in_mlflow(tmp_path, pico_zoo):
    """The MLflow run of `fedlab run` carries the trained model as an adapter folder (model/<role>/) with the
    manifest naming its base: what the UI's comparison leads to loads with PEFT."""
    import contextlib
    import io

    import mlflow
    from peft import PeftConfig

    argv = ["run", str(ROOT / "experiments/defaults.yaml"), *[a for a in RUN if not a.startswith("tracking.")],
            f"tracking.uri=sqlite:///{tmp_path}/m.db", f"tracking.artifact_root={tmp_path}/art",
            f"output_dir={tmp_path}/runs"]
    with contextlib.chdir(tmp_path), contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert main(argv) == 0
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path}/m.db")
    run = mlflow.search_runs(experiment_names=["fedlab"], output_format="list")[0]
    local = Path(mlflow.artifacts.download_artifacts(run_id=run.info.run_id, artifact_path="model",
                                                     dst_path=str(tmp_path / "dl")))
    manifest = json.loads((local / "manifest.json").read_text())
    assert manifest["parties"]["model"]["base_model"] == "pico-llama"
    assert PeftConfig.from_pretrained(local / "model").peft_type == "LORA"
    assert (local / "model" / "adapter_model.safetensors").stat().st_size > 0


def _parties_load_with_fedlabs_logits(run: Path, out: Path) -> dict:
    """Export the run and load every party with PEFT: the logits of fedlab's own model in memory (1e-6);
    returns the manifest."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from fedlab.export import method_of_run
    from fedlab.models.modes import eval_mode
    from fedlab.transforms.lora import set_state

    assert main(["export", str(run), "--to", str(out)]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    method = method_of_run(run)
    parties = method.export_parties()
    assert sorted(p.role for p in parties) == sorted(manifest["parties"])
    for party in parties:
        entry = manifest["parties"][party.role]
        res = party.resident
        ids = res.tokenizer(["Who lives in Paris? The answer is"], return_tensors="pt")
        with torch.no_grad(), eval_mode(*([res.model] if party.model is None else [party.model])):
            if party.model is not None:          # a whole model (a fused LLM): its own folder
                ours = party.model(**ids).logits
                theirs = AutoModelForCausalLM.from_pretrained(out / entry["merged"]).eval()(**ids).logits
            else:
                set_state(res.model, party.state)
                ours = res.model(**ids).logits
                if "adapted" in entry:          # adapters inside the blocks: the folder brings their code
                    theirs = AutoModelForCausalLM.from_pretrained(out / entry["adapted"], trust_remote_code=True)
                    theirs = theirs.eval()(**ids).logits
                else:
                    base = AutoModelForCausalLM.from_pretrained(out / entry["base"])
                    theirs = PeftModel.from_pretrained(base, out / entry["adapter"]).eval()(**ids).logits
        assert entry["base_model"] == res.name
        assert (theirs - ours).abs().max() < 1e-6, party.role
    return manifest


@pytest.mark.federation
def test_fedmkt_exports_its_llm_and_each_clients_slm(tmp_path, pico_zoo):
    from fedlab.models import zoo

    zoo.build("pico-opt", progress=False)
    run = [*PICO, "federation.rounds=1", "method.name=fedmkt", "model.clients=[pico-gpt2,pico-opt]",
           "data.num_clients=2", "data.partition=iid", "data.public_source=holdout", "data.tasks=[recall]",
           "data.train_per_task=24", "tracking.enabled=false", f"output_dir={tmp_path}/runs"]
    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert main(["run", str(ROOT / "experiments/defaults.yaml"), *run]) == 0
    folder = next((tmp_path / "runs").iterdir())
    manifest = _parties_load_with_fedlabs_logits(folder, tmp_path / "out")
    assert {r: e["base_model"] for r, e in manifest["parties"].items()} == {
        "llm": "pico-llama", "slm_0": "pico-gpt2", "slm_1": "pico-opt"}
    # the run itself logged the same parties beside it
    assert sorted(json.loads((folder / "model" / "manifest.json").read_text())["parties"]) == ["llm", "slm_0", "slm_1"]


@pytest.mark.federation
def test_fedproxy_exports_its_proxy_over_its_own_blocks_and_the_fused_llm(tmp_path, pico_zoo):
    import contextlib
    import io

    from transformers import AutoConfig

    run = [*PICO, "federation.rounds=1", "method.name=fedproxy", "method.kappa=0.5", "method.bi_samples=8",
           "data.num_clients=2", "data.partition=iid", "data.tasks=[recall]", "tracking.enabled=false",
           f"output_dir={tmp_path}/runs"]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert main(["run", str(ROOT / "experiments/defaults.yaml"), *run]) == 0
    folder = next((tmp_path / "runs").iterdir())
    manifest = _parties_load_with_fedlabs_logits(folder, tmp_path / "out")
    proxy, llm = manifest["parties"]["proxy"], manifest["parties"]["llm"]
    assert proxy["transforms"][0] == "proxy" and llm["merged"] == "llm"
    blocks = lambda path: AutoConfig.from_pretrained(tmp_path / "out" / path).num_hidden_layers   # noqa: E731
    assert blocks(proxy["base"]) < blocks(llm["merged"])          # the proxy's base is the LLM's kept blocks


@pytest.mark.federation
def test_standalone_exports_each_clients_own_model(tmp_path, pico_zoo):
    import contextlib
    import io

    run = [*PICO, "federation.rounds=1", "method.name=standalone", "data.num_clients=2", "data.tasks=[recall]",
           "tracking.enabled=false", f"output_dir={tmp_path}/runs"]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert main(["run", str(ROOT / "experiments/defaults.yaml"), *run]) == 0
    manifest = _parties_load_with_fedlabs_logits(next((tmp_path / "runs").iterdir()), tmp_path / "out")
    assert sorted(manifest["parties"]) == ["client_0", "client_1"]


@pytest.mark.parametrize("where", ["attn_ffn", "block"])
def test_a_model_with_adapters_inside_its_blocks_loads_with_transformers_with_the_same_logits(pico_zoo, tmp_path,
                                                                                             where):
    """FedAP's adapters (after attention and feed-forward) and Co-PLMs' domain adapters (on each block's output)
    travel in a folder that brings their code: transformers loads it (trust_remote_code) with fedlab's logits,
    and without the adapters the logits are not those."""
    from transformers import AutoModelForCausalLM

    from fedlab.config import LoraConfig
    from fedlab.export_adapted import CODE, hosts, save_adapted
    from fedlab.models.zoo import load_model
    from fedlab.transforms.adapters import adapters_transform
    from fedlab.transforms.registry import Build

    model, tok = load_model("pico-llama")
    model = adapters_transform(model, Build(lora=LoraConfig(), seed=0), where=where)
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if ".up." in n:         # the adapters start as the identity; trained ones are not
                p.add_(0.1 * torch.randn(p.shape, generator=g))
    save_adapted(model, tok, tmp_path / "out")
    assert (tmp_path / "out" / CODE).is_file() and len(hosts(model)) == (8 if where == "attn_ffn" else 4)
    ids = tok(["Who lives in Paris? The answer is"], return_tensors="pt")
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path / "out", trust_remote_code=True).eval()
    plain, _ = load_model("pico-llama")
    with torch.no_grad():
        ours, theirs, base = model.eval()(**ids).logits, loaded(**ids).logits, plain.eval()(**ids).logits
    assert (theirs - ours).abs().max() < 1e-6
    assert (base - ours).abs().max() > 1e-3
