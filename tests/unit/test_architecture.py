"""The shape of the code: no import cycles in fedlab, no method named in the runtime, methods and model
transforms registered by themselves — including a method written outside fedlab, with a two-phase round,
run by `fedlab run` on both backends."""
from __future__ import annotations

import ast
import re
import textwrap
from pathlib import Path

import pytest

from conftest import PICO

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "fedlab"


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def import_graph() -> dict[str, set[str]]:
    """Module → fedlab modules it imports (anywhere in the file, lazy imports included)."""
    modules = {_module_name(p): p for p in PKG.rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for mod, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module
                           for a in node.names]
            graph[mod].update(t for t in targets if t in modules and t != mod)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_import_graph_has_no_cycles():
    graph = import_graph()
    assert len(graph) > 40
    assert cycles(graph) == []


def test_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_runtime_and_the_plan_name_no_method():
    """No registered method's name in the runtime or the plan package (the runtime also names none of FedProxy's
    parts; "proxy" is a role the plan may name)."""
    from fedlab import registry

    def named(folder, words):
        pattern = re.compile(r"\b(" + "|".join(map(re.escape, words)) + r")\b", re.IGNORECASE)
        return [f"{folder}/{p.name}:{i + 1}: {line.strip()}" for p in (PKG / folder).glob("*.py")
                for i, line in enumerate(p.read_text().splitlines()) if pattern.search(line)]
    methods = registry.method_names()
    assert named("runtime", methods + ["proxy", "emulator", "offsite", "h_ties", "pcr"]) == []
    assert named("plan", methods) == []


def test_nothing_outside_the_methods_imports_a_method():
    """fedlab's code outside fedlab/methods/ reaches a method only through the registry (its config, classes and
    CLI commands), never by importing its package."""
    packages = {p.name for p in (PKG / "methods").iterdir() if (p / "__init__.py").exists()}   # not base.py, client.py
    graph = import_graph()
    found = sorted(f"{m} imports {d}" for m, deps in graph.items() if not m.startswith("fedlab.methods")
                   for d in deps if d.startswith("fedlab.methods.") and d.split(".")[2] in packages)
    assert found == []


def test_a_method_brings_its_own_cli_command(capsys):
    """Floe's `fedlab profile` is registered by the Floe package and reaches the CLI through the registry."""
    from fedlab import registry
    from fedlab.cli import build_parser

    assert [c.name for c in registry.commands()] == ["profile"]
    args = build_parser().parse_args(["profile", "experiments/floe/base.yaml", "--force"])
    assert args.force and args.config == "experiments/floe/base.yaml" and callable(args.fn)
    with pytest.raises(ValueError, match="command 'profile' is already registered"):
        registry.register_command("profile", "another", "x:add", "x:run")


def test_methods_ask_capabilities_not_backend_names():
    """Methods reach Ray only through the runtime (parties, backends), and nothing outside the backend registry
    compares a backend's name."""
    ray = [f"{p.relative_to(PKG)}" for p in (PKG / "methods").rglob("*.py") if re.search(r"^\s*(import ray|from ray)",
                                                                                        p.read_text(), re.M)]
    named = [f"{p.relative_to(PKG)}:{i + 1}" for p in PKG.rglob("*.py") if p.name != "capabilities.py"
             for i, line in enumerate(p.read_text().splitlines())
             if re.search(r"backend\.name\s*[!=]=", line)]
    assert ray == [] and named == []


def test_every_method_package_registers_itself():
    from fedlab import registry

    packages = sorted(p.parent.name for p in (PKG / "methods").glob("*/__init__.py"))
    modules = {registry.get(n).config_cls.__module__.split(".")[2] for n in registry.method_names()}
    assert set(packages) == modules
    for name in registry.method_names():
        entry = registry.get(name)
        assert entry.config_cls.name == name
        assert hasattr(entry.client_cls, "fit") and hasattr(entry.method_cls, "run_round")


def test_registering_a_taken_name_fails():
    from fedlab import registry
    from fedlab.validation import MethodConfig

    assert "fedavg" in registry.method_names()      # the built-in methods registered (a fresh process has not yet)
    with pytest.raises(ValueError, match="already registered"):
        registry.register_method("fedavg", MethodConfig, "somewhere.else:Other")


def test_entry_point_methods_are_loaded(tmp_path, monkeypatch):
    import importlib.metadata

    from fedlab import registry

    (tmp_path / "ep_method.py").write_text(textwrap.dedent('''
        from dataclasses import dataclass
        from fedlab.registry import register_method
        from fedlab.validation import MethodConfig

        @dataclass(frozen=True)
        class EPConfig(MethodConfig):
            name: str = "from_entry_point"

        register_method("from_entry_point", EPConfig, "fedlab.methods.fedavg.method:FedAvg")
    '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    ep = importlib.metadata.EntryPoint("from_entry_point", "ep_method", "fedlab.methods")
    real = importlib.metadata.entry_points
    monkeypatch.setattr(importlib.metadata, "entry_points",
                        lambda **kw: [ep] if kw.get("group") == "fedlab.methods" else real(**kw))
    monkeypatch.setattr(registry, "_LOADED", False)
    assert "from_entry_point" in registry.method_names()
    registry._METHODS.pop("from_entry_point")


# a method written outside fedlab: its own config, server class with a two-phase round, client class and a
# model transform, registered by the file itself
PLUGIN = '''
from dataclasses import dataclass

import torch

from fedlab.aggregators import fedavg
from fedlab.comm.messages import FitIns, FitRes
from fedlab.methods.base import FedMethod, apply_delta, stack_deltas
from fedlab.methods.client import LoraClient
from fedlab.registry import register_method
from fedlab.transforms import chain_to_wire, register_transform, transform
from fedlab.transforms.lora import flatten_state
from fedlab.validation import MethodConfig, check


@register_transform("first_blocks", params=("n",))
def first_blocks(model, build, n):
    """Keep the first n decoder blocks (a toy transform declared outside fedlab)."""
    from fedlab.transforms.compress import make_proxy

    return make_proxy(model, list(range(n)), copy=False)


@dataclass(frozen=True)
class TwoPhaseConfig(MethodConfig):
    name: str = "two_phase"
    server_lr: float = 1.0

    def validate(self, p):
        check(self.server_lr > 0, f"{p}.server_lr", self.server_lr, "a number > 0")


class TwoPhaseClient(LoraClient):
    def fit(self, ins):
        if ins.config.get("phase") == "check":   # phase 2: how far the new global state is from mine
            mine = flatten_state(self.own_state)
            drift = float((flatten_state(ins.state, list(self.own_state)) - mine).norm())
            return FitRes(self.cid, ins.round, None, 1, {"check/drift": drift})
        return super().fit(ins)


class TwoPhase(FedMethod):
    chain = (transform("first_blocks", n=3),)

    def setup(self):
        from fedlab.runtime.resident import get_resident

        self.global_state = dict(get_resident(self.cfg, chain=self.chain).init_state)

    def instruction(self, rnd, phase):
        return FitIns(rnd, self.global_state, {"phase": phase, "transform": chain_to_wire(self.chain)})

    def run_round(self, rnd, ctx):
        ups = ctx.fit({c: self.instruction(rnd, "train") for c in ctx.sample()})
        cids, tau, n = stack_deltas(ups, self.global_state)
        self.global_state = apply_delta(self.global_state, self.cfg.method.server_lr * fedavg(tau, n))
        checks = ctx.fit({c: self.instruction(rnd, "check") for c in ups})
        ctx.log({"answers_phase_2": len(checks)}, prefix="server/")

    def configure_evaluate(self, rnd, cids):
        from fedlab.comm.messages import EvalIns

        return {c: EvalIns(rnd, self.global_state, {"transform": chain_to_wire(self.chain)}) for c in cids}


register_method("two_phase", TwoPhaseConfig, TwoPhase, TwoPhaseClient)
'''


@pytest.mark.federation
def test_a_method_outside_fedlab_runs_with_fedlab_run(pico_zoo, tmp_path, capsys):
    ray = pytest.importorskip("ray")
    from safetensors.torch import load_file

    from fedlab.cli import main
    from fedlab.config import load_config
    from fedlab.experiment import run_experiment

    folder = tmp_path / "my_methods"
    folder.mkdir()
    (folder / "two_phase.py").write_text(PLUGIN)
    # the YAML names the plugin by a path relative to itself
    (folder / "two_phase.yaml").write_text("plugins: [two_phase.py]\nmethod: {name: two_phase, server_lr: 1.0}\n")
    common = [*PICO, "data.num_clients=2", "data.tasks=[recall,sentiment]", "tracking.enabled=false"]
    assert main(["run", str(folder / "two_phase.yaml"), *common, f"output_dir={tmp_path}/cli"]) == 0
    assert "mean (over clients)" in capsys.readouterr().out

    named = [*common, f"plugins=[{folder / 'two_phase.py'}]", "method.name=two_phase"]
    a = run_experiment(load_config(None, [*named, f"output_dir={tmp_path}/a"]), progress=False)
    try:
        b = run_experiment(load_config(None, [*named, f"output_dir={tmp_path}/b", "backend.name=ray",
                                              "backend.num_workers=2", "backend.num_cpus=2"]), progress=False)
    finally:
        ray.shutdown()
    state_bytes = sum(v.numel() * 4 for v in load_file(str(Path(a.out_dir) / "adapters.safetensors")).values())
    # per instruction: the state, plus the config by hand — "phase" + '"train"' (or '"check"') + "transform"
    # + '["first_blocks", 3]' = 5 + 7 + 9 + 19 bytes; 2 clients × 2 phases
    per_round_down = 2 * 2 * (state_bytes + 40)
    for h in (a, b):
        for r in h.rounds[1:]:
            assert r["server/answers_phase_2"] == 2 and r["clients/ok"] == 2
            assert r["check/drift"] > 0                      # phase 2 saw the aggregated state
            assert r["bytes/down"] == per_round_down
    keys = [k for k in a.rounds[-1] if k.startswith(("acc/", "loss/", "bytes/", "check/"))]
    assert [{k: r.get(k) for k in keys} for r in a.rounds] == [{k: r.get(k) for k in keys} for r in b.rounds]


@pytest.mark.federation
def test_the_architecture_example_runs_and_reduces_to_fedavg(pico_zoo, tmp_path):
    """ARCHITECTURE.md's FedAvgM, as written there: with β = 0 and η = 1 it is FedAvg, number for number."""
    from fedlab.config import load_config
    from fedlab.experiment import run_experiment

    text = (ROOT / "ARCHITECTURE.md").read_text()
    block = text.split("## A new method end to end", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    assert block.count("\n") <= 80
    (tmp_path / "fedavgm.py").write_text(block)
    common = [*PICO, "data.num_clients=2", "data.tasks=[recall,sentiment]", "tracking.enabled=false"]
    run = lambda name, *extra: run_experiment(load_config(None, [  # noqa: E731
        *common, f"plugins=[{tmp_path / 'fedavgm.py'}]", f"method.name={name}", f"output_dir={tmp_path}/{name}",
        *extra]), progress=False)
    plain = run("fedavgm", "method.beta=0.0")
    avg = run("fedavg")
    keys = lambda h: [{k: v for k, v in r.items() if k.startswith(("acc/", "loss/"))} for r in h.rounds]  # noqa: E731
    assert keys(plain) == keys(avg)
    momentum = run("fedavgm", "method.beta=0.9", "federation.rounds=3")
    assert momentum.rounds[-1]["server/velocity_norm"] > plain.rounds[-1]["server/velocity_norm"] > 0
