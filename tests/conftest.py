"""Test set-up: an isolated fedlab home (zoo cache) and MLflow store per session, pico models."""
from __future__ import annotations

import os
import warnings

import pytest

warnings.filterwarnings("ignore")


@pytest.fixture(scope="session", autouse=True)
def fedlab_home(tmp_path_factory):
    # FEDLAB_TEST_HOME keeps a zoo cache between local runs; CI starts empty
    home = os.environ.get("FEDLAB_TEST_HOME") or str(tmp_path_factory.mktemp("fedlab_home"))
    os.environ["FEDLAB_HOME"] = home
    return home


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
