"""Config fields carry their help where they are declared (`fedlab.validation.doc`); `fedlab.config_help` reads it
back for documentation tables and `fedlab config show`, which also says where each value came from."""
import dataclasses
import typing
from pathlib import Path

import pytest

from fedlab import registry
from fedlab.cli import main
from fedlab.config import ExperimentConfig, load_config, load_config_with_sources
from fedlab.config_help import fields, format_value, markdown_table, sections
from fedlab.methods.fedmkt.config import FedMKTConfig
from fedlab.validation import doc

ROOT = Path(__file__).resolve().parents[2]
HETERO = "experiments/fedmkt/hetero.yaml"
TOPK_HELP = "K: top-K logits per position in a knowledge message"


def _config_classes():
    """Every config class of an experiment: each section's, every built-in method's, and the classes nested in
    them (model.lora, faults' items, Floe's device classes)."""
    seen, todo = [], [ExperimentConfig] + [s.cls for s in sections() if s.cls.__module__.startswith("fedlab.")]
    while todo:
        cls = todo.pop()
        if cls in seen:
            continue
        seen.append(cls)
        for hint in typing.get_type_hints(cls).values():
            for t in (hint, *typing.get_args(hint)):
                if dataclasses.is_dataclass(t) and t not in seen:
                    todo.append(t)
    return seen


def test_sections_cover_the_experiment_config_and_every_registered_method():
    got = sections()
    assert [s.prefix for s in got if s.method is None] == ["", "model", "data", "federation", "backend", "eval",
                                                           "tracking"]
    methods = {s.method: s.cls for s in got if s.prefix == "method"}
    assert sorted(methods) == registry.method_names()
    assert methods["fedmkt"] is FedMKTConfig and methods["llm2slm"].__name__ == "LLM2SLMConfig"
    top = [r.key for r in got[0].rows]
    assert "seed" in top and "faults" in top and "faults[].kind" in top and not any(k.startswith("model") for k in top)


def test_every_field_of_every_config_class_has_help():
    classes = _config_classes()
    names = {c.__name__ for c in classes}
    assert {"LoraConfig", "ModelConfig", "DataConfig", "FederationConfig", "BackendConfig", "EvalConfig",
            "TrackingConfig", "FaultConfig", "ExperimentConfig", "MethodConfig", "FedMKTConfig", "LLM2SLMConfig",
            "ElsaConfig", "FloeConfig", "DeviceClass", "CoPLMsConfig", "FedProxyConfig", "FedBiOTConfig"} <= names
    missing = [f"{c.__module__}.{c.__qualname__}.{f.name}" for c in classes for f in dataclasses.fields(c)
               if not str(f.metadata.get("help", "")).strip()]
    assert not missing, f"fields without help (declare them with fedlab.validation.doc): {missing}"
    rows = [r for s in sections() if s.cls.__module__.startswith("fedlab.") for r in s.rows]
    assert rows and all(r.help.strip() for r in rows)


def test_help_says_what_a_field_does_now():
    """No working-note citations in help: it cites the paper or the method's README."""
    import re

    bad = [(c.__name__, f.name) for c in _config_classes() for f in dataclasses.fields(c)
           if re.search(r"SPEC|§|\bissue \d|20\d\d-\d\d-\d\d", f.metadata.get("help", ""))]
    assert not bad


def test_doc_keeps_defaults_and_factories():
    @dataclasses.dataclass(frozen=True)
    class C:
        a: int = doc(3, "an int")
        b: list = doc(help="a list", factory=list)
        c: str = doc(None, "a path", input_path=True)

    x, y = C(), C()
    assert (x.a, x.b, x.c) == (3, [], None) and x.b is not y.b
    f = {f.name: f for f in dataclasses.fields(C)}
    assert f["a"].metadata["help"] == "an int" and f["c"].metadata["input_path"] is True
    with pytest.raises(TypeError):
        doc(1, "both", factory=list)


def test_markdown_table_of_fedmkt():
    table = markdown_table(FedMKTConfig, "method").splitlines()
    assert table[0] == "| key | type | default | meaning |"
    assert f"| `method.topk` | `int` | `16` | {TOPK_HELP} |" in table
    assert "| `method.name` | `str` | `fedmkt` |" in "\n".join(table)
    # a type with arguments and a null default, and a `|` in the help escaped for the table
    row = next(r for r in table if r.startswith("| `method.client_lr`"))
    assert "`Optional[list[float]]`" in row and "`null`" in row
    assert "\\|" in next(r for r in table if r.startswith("| `method.selection`"))
    assert [r.key for r in fields(FedMKTConfig, "method")][:2] == ["method.name", "method.topk"]


def test_nested_and_list_fields_are_documented():
    keys = [r.key for r in fields(ExperimentConfig)]
    assert "model.lora.r" in keys and "faults[].kind" in keys and "method.name" in keys
    assert format_value((1, 2)) == "[1, 2]" and format_value(None) == "null" and format_value(True) == "true"


def test_sources_do_not_change_the_config():
    cfg, _ = load_config_with_sources(ROOT / HETERO, ["method.topk=8"])
    assert cfg == load_config(ROOT / HETERO, ["method.topk=8"])


def _show(capsys, *args):
    code = main(["config", "show", *args])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


def _line(lines, key):
    hits = [ln for ln in lines if ln.split(" = ", 1)[0].strip() == key]
    assert len(hits) == 1, lines
    return hits[0]


def test_config_show_a_key_with_its_help_default_and_file(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    code, lines, err = _show(capsys, HETERO, "method.topk")
    assert code == 0 and not err
    assert len(lines) == 1
    line = lines[0]
    assert line.startswith("method.topk = 16 ") and "default: 16" in line and TOPK_HELP in line
    assert f"source: {HETERO}" in line      # hetero.yaml writes topk: 16


def test_config_show_names_the_command_line_the_parent_files_and_the_default(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    code, lines, err = _show(capsys, HETERO, "method.topk=8", "federation.batch_size=4")
    assert code == 0 and not err
    assert "source: command line" in _line(lines, "method.topk") and "= 8 " in _line(lines, "method.topk")
    assert "source: command line" in _line(lines, "federation.batch_size")
    assert "source: experiments/fedmkt/base.yaml" in _line(lines, "federation.lr")   # hetero.yaml's parent
    assert "source: experiments/defaults.yaml" in _line(lines, "model.lora.r")       # its grandparent
    assert "source: default" in _line(lines, "method.public_batch_size")
    assert "source: default" in _line(lines, "seed")
    keys = [ln.split(" = ", 1)[0].strip() for ln in lines]
    assert len(keys) == len(set(keys)) and "model.lora.target_modules" in keys and "faults" in keys
    # a prefix restricts the lines; overrides may stand before it
    code, lines, _ = _show(capsys, HETERO, "method.lam=0.5", "method.")
    assert code == 0 and lines and all(ln.startswith("method.") for ln in lines)
    assert "source: command line" in _line(lines, "method.lam")


def test_config_show_follows_a_defaults_chain_and_a_method_switch(capsys, tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "parent.yaml").write_text("method: {name: fedmkt, topk: 4, lam: 0.5}\nfederation: {rounds: 2}\n")
    child = tmp_path / "sub" / "child.yaml"
    child.write_text("defaults: ../parent.yaml\nmethod: {lam: 0.7}\n")
    cfg, sources = load_config_with_sources(child)
    assert (cfg.method.topk, cfg.method.lam) == (4, 0.7)
    assert sources["method.topk"].endswith("parent.yaml") and sources["method.lam"].endswith("child.yaml")
    assert sources["federation.rounds"].endswith("parent.yaml") and "federation.lr" not in sources
    # naming another method on the command line drops the file's method fields (and their sources)
    cfg, sources = load_config_with_sources(child, ["method.name=fedprox"])
    assert cfg.method.name == "fedprox" and sources["method.name"] == "command line"
    assert not [k for k in sources if k.startswith("method.") and k != "method.name"]
    code, lines, _ = _show(capsys, str(child), "method.topk")
    assert code == 0 and "source: " + sources["federation.rounds"] in lines[0]


@pytest.mark.parametrize("args, needle", [
    ([HETERO, "method.nope"], "no key of this config starts with 'method.nope'"),
    ([HETERO, "metod.topk"], "did you mean 'method.topk'"),
    (["experiments/no_such.yaml"], "does not exist"),
    (["experiments"], "is a folder; expected a YAML file"),
    ([HETERO, "method.topk=0"], "method.topk"),
    ([HETERO, "a", "b"], "one KEY-PREFIX at most"),
])
def test_config_show_fails_in_one_line(capsys, monkeypatch, args, needle):
    monkeypatch.chdir(ROOT)
    code, lines, err = _show(capsys, *args)
    assert code == 2 and not lines
    err_lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(err_lines) == 1 and err_lines[0].startswith("fedlab: error: ") and needle in err_lines[0], err
