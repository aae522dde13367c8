"""Pinned CPU numerics: fedlab pins ATen, MKL and oneDNN to AVX2 before torch loads, and this machine's
digest of a fixed computation equals the reference machine's (the check `fedlab doctor` prints)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fedlab import numerics


def test_the_pin_is_in_force_in_this_process():
    assert numerics.mode() == "pinned"
    assert {k: os.environ[k] for k in numerics.PIN} == numerics.PIN
    assert numerics.capability() == "AVX2" and numerics.in_force()


def test_the_digest_equals_the_reference_machine():
    """The same computation as shared/tools/numerics_digest.py; REFERENCE holds what it printed on the reference
    machine (AMD EPYC, AVX2). A machine that fails this computes fedlab's operations with other bits: its zoo
    builds and runs will not reproduce the recorded tables (see README, 'The same numbers on every machine')."""
    ref = numerics.reference()
    assert ref is not None, "no reference digest for this torch / transformers: measure one (fedlab doctor)"
    assert {t: numerics.digest(t) for t in (1, 2)} == ref


def _python(code: str, **env) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in (*numerics.PIN, numerics.ENV)}
    return subprocess.run([sys.executable, "-c", code], env={**clean, **env}, capture_output=True, text=True,
                          timeout=120)


def test_native_mode_leaves_the_kernels_alone_and_bad_modes_are_one_line():
    code = "import fedlab, os; from fedlab import numerics; print(numerics.mode(), os.environ.get('ATEN_CPU_CAPABILITY'))"
    assert _python(code).stdout.split() == ["pinned", "avx2"]
    assert _python(code, FEDLAB_NUMERICS="native").stdout.split() == ["native", "None"]
    out = subprocess.run([sys.executable, "-m", "fedlab.cli", "doctor"], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "FEDLAB_NUMERICS": "fast"})
    assert out.returncode == 2 and out.stderr.strip().count("\n") == 0
    assert "FEDLAB_NUMERICS='fast' is not allowed; allowed: pinned, native" in out.stderr


def test_the_pin_overrides_a_users_own_capability_before_torch_loads():
    code = "import fedlab, torch; print(torch.backends.cpu.get_cpu_capability())"
    assert _python(code, ATEN_CPU_CAPABILITY="default").stdout.strip() == "AVX2"
    assert _python(code, ATEN_CPU_CAPABILITY="default", FEDLAB_NUMERICS="native").stdout.strip() == "DEFAULT"


def test_a_config_asking_for_other_numerics_than_the_process_is_refused_in_one_line():
    from conftest import PICO
    from fedlab.config import ConfigError, load_config
    from fedlab.experiment import preflight

    cfg = load_config(None, [*PICO, "numerics=native"])
    with pytest.raises(ConfigError, match=r"numerics: 'native' is not this process's mode \('pinned'"):
        preflight(cfg)
    with pytest.raises(ConfigError, match="numerics: 'fast' is not allowed; allowed: native, pinned"):
        load_config(None, ["numerics=fast"])


def test_doctor_prints_the_digests(capsys):
    from fedlab.cli import main

    code = main(["doctor"])
    out = capsys.readouterr().out
    assert "digest threads=1: " in out and "digest threads=2: " in out and "cpu: " in out
    from fedlab import idle_threads

    assert f"OpenMP idle threads (fedlab/idle_threads.py): {idle_threads.decision}\n" in out
    assert code == (0 if "recorded tables reproduce here" in out else 1)


def test_fedlab_run_restarts_itself_in_the_mode_a_config_asks_for(monkeypatch):
    import subprocess as sp

    from fedlab.cli import main

    seen = {}
    monkeypatch.setattr(sp, "call", lambda cmd, env: seen.update(cmd=cmd, env=env) or 0)
    argv = ["run", str(Path(__file__).resolve().parents[2] / "experiments/defaults.yaml"), "model.name=pico-llama",
            "numerics=native"]
    assert main(argv) == 0
    assert seen["cmd"][1:] == ["-m", "fedlab.cli", *argv] and seen["env"]["FEDLAB_NUMERICS"] == "native"
