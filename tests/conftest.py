"""Test set-up: an isolated fedlab home (zoo cache) and MLflow store per session, pico models."""
from __future__ import annotations

import os
import warnings

import pytest

warnings.filterwarnings("ignore")

pytest_plugins = ["pytester"]


@pytest.fixture(scope="session", autouse=True)
def fedlab_home(tmp_path_factory):
    # FEDLAB_TEST_HOME keeps a zoo cache between local runs; CI starts empty
    home = os.environ.get("FEDLAB_TEST_HOME") or str(tmp_path_factory.mktemp("fedlab_home"))
    os.environ["FEDLAB_HOME"] = home
    return home


# The `federation` marker: a test whose body runs a whole federation in its process (`run_federation`) must
# carry it, so `-m "not slow and not federation"` selects the fast unit-level tests; tests that run one in a
# subprocess or in a fixture carry it too, by hand. A test body that runs one without the marker fails and says so;
# FEDLAB_TEST_FEDERATIONS=<file> lists them instead. Only the call phase counts: a module fixture's run belongs
# to whichever test xdist happens to set it up for.
_CURRENT: list[str] = []
_FEDERATIONS: set[str] = set()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    _CURRENT[:] = [item.nodeid]
    yield
    _CURRENT[:] = []


@pytest.fixture(scope="session", autouse=True)
def _count_federations(fedlab_home):
    import fedlab.runtime.federation as federation

    real = federation.run_federation

    def counted(*args, **kwargs):
        _FEDERATIONS.update(_CURRENT)
        return real(*args, **kwargs)
    federation.run_federation = counted
    yield
    federation.run_federation = real


@pytest.fixture(autouse=True)
def _federation_marker(request, _count_federations):
    yield
    if request.node.nodeid not in _FEDERATIONS or request.node.get_closest_marker("federation"):
        return
    listing = os.environ.get("FEDLAB_TEST_FEDERATIONS")
    if listing:
        with open(listing, "a") as f:
            f.write(request.node.nodeid + "\n")
        return
    pytest.fail("this test runs a whole federation: mark it @pytest.mark.federation", pytrace=False)


@pytest.fixture(scope="session")
def pico_zoo(fedlab_home):
    from fedlab.models import zoo

    for name in ("pico-llama", "pico-gpt2"):
        zoo.build(name, progress=False)
    return fedlab_home


@pytest.fixture()
def tracking_overrides(tmp_path):
    return [f"tracking.uri=sqlite:///{tmp_path}/mlflow.db", f"tracking.artifact_root={tmp_path}/artifacts",
            f"output_dir={tmp_path}/runs"]


PICO = ["model.name=pico-llama", "federation.rounds=2", "data.train_per_task=24", "data.test_per_task=16",
        "federation.batch_size=8", "model.max_length=64"]


def _written(value: str) -> str:
    """A chosen value as the READMEs write it: a rate in short scientific form (0.001 → 1e-3), anything else as is."""
    if "." not in value:
        return value
    mantissa, exponent = f"{float(value):.0e}".split("e")
    return f"{mantissa}e{int(exponent)}"


@pytest.fixture
def written():
    """`_written`: how a README writes a value a validation page chose."""
    return _written


@pytest.fixture(autouse=True)
def _judged_here(monkeypatch):
    """Records are judged against this machine's numerics in every test (a user's exported
    FEDLAB_JUDGE_NUMERICS=reference would stop the tests that run tables); `reference_kind` sets it."""
    monkeypatch.delenv("FEDLAB_JUDGE_NUMERICS", raising=False)


@pytest.fixture
def reference_kind(monkeypatch):
    """Judge records as the reference machine kind does (FEDLAB_JUDGE_NUMERICS=reference): the shipped results
    pages are rendered that way, and on a machine of no measured kind every shipped record is stale
    (docs/reproducibility.md)."""
    from fedlab import numerics

    monkeypatch.setenv(numerics.JUDGE_ENV, "reference")
