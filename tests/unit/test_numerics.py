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


def test_the_digest_is_the_reference_machines_or_that_of_a_kind_measured_to_differ():
    """The same computation as shared/tools/numerics_digest.py; REFERENCE holds what it printed on the reference
    machine (AMD EPYC, AVX2), OTHER_KINDS what it printed, under the pin, on machine kinds that compute other bits.
    Either way the pin makes the bits independent of the thread count. A machine whose digest is in neither is
    a kind not measured yet, or the pin no longer holds: its zoo builds and runs will not reproduce the recorded
    tables (docs/reproducibility.md)."""
    ref = numerics.reference()
    assert ref is not None, "no reference digest for this torch / transformers: measure one (fedlab doctor)"
    got = {t: numerics.digest(t) for t in (1, 2)}
    assert got == ref or (got[1] == got[2] and numerics.other_kind(got[1]) is not None), got


REF = numerics.REFERENCE[("2.13.0", "5.23.0")][1]
INTEL = next(iter(numerics.OTHER_KINDS[("2.13.0", "5.23.0")]))


@pytest.fixture(autouse=True)
def _judged_afresh():
    """The cached fingerprints are forgotten after each test (some judge as another machine)."""
    yield
    numerics._fingerprint_judged.cache_clear()
    numerics.measured_fingerprints.cache_clear()


def _as_machine(monkeypatch, digest: str) -> None:
    """This process judged as a machine whose digest is `digest`."""
    monkeypatch.setattr(numerics, "machine_digest", lambda: digest)
    numerics._fingerprint_judged.cache_clear()


def test_a_machine_that_computes_other_bits_puts_its_digest_in_the_fingerprint(monkeypatch):
    env = {**numerics.environment(), "torch": "2.13.0+cpu", "transformers": "5.23.0"}
    plain = numerics.fingerprint(env)
    assert numerics.fingerprint({**env, "digest": REF}) == plain                       # the reference's
    assert numerics.fingerprint({**env, "digest": INTEL}) == plain + f"|digest={INTEL}"
    # library versions with no measured reference: every machine's digest is part of its fingerprint
    other = {**env, "transformers": "9.9.9"}
    assert numerics.fingerprint({**other, "digest": REF}) == numerics.fingerprint(other) + f"|digest={REF}"
    for digest, suffix in ((REF, ""), (INTEL, f"|digest={INTEL}")):
        _as_machine(monkeypatch, digest)
        assert numerics.current_fingerprint() == numerics.fingerprint(numerics.environment()) + suffix
        assert numerics.is_reference_kind() is (digest == REF)


UNMEASURED = "0123456789abcdef"      # a digest no kind was measured to print


def test_a_record_of_a_measured_kind_is_current_everywhere_and_one_of_an_unmeasured_kind_only_there(monkeypatch):
    from fedlab.evidence.records import stale_numerics

    env = numerics.environment()
    made_there = {"environment": {"numerics_fingerprint": numerics.fingerprint({**env, "digest": REF})}}
    made_on_intel = {"environment": {"numerics_fingerprint": numerics.fingerprint({**env, "digest": INTEL})}}
    made_elsewhere = {"environment": {"numerics_fingerprint": numerics.fingerprint({**env, "digest": UNMEASURED})}}
    for machine in (REF, INTEL, UNMEASURED):
        _as_machine(monkeypatch, machine)
        for judge in ("reference", "here"):
            monkeypatch.setenv(numerics.JUDGE_ENV, judge)
            assert not stale_numerics(made_there) and not stale_numerics(made_on_intel)
            # an unmeasured kind's record: current where it was made, judged as that machine judges
            assert stale_numerics(made_elsewhere) is not (machine == UNMEASURED and judge == "here")
        assert numerics.is_measured_kind() is (machine != UNMEASURED)
    old_code_on_intel = {"environment": {"numerics_fingerprint": made_there["environment"]["numerics_fingerprint"],
                                         "cpu": "Intel(R) Xeon(R) Processor (AVX-512)"}}
    assert stale_numerics(old_code_on_intel)      # the reference's fingerprint, with no digest, from another CPU
    native = {"environment": {"numerics_fingerprint": numerics.fingerprint({**env, "numerics": "native",
                                                                             "digest": REF})}}
    assert stale_numerics(native) and stale_numerics({"environment": {}})


def test_a_records_kind_is_named_from_its_fingerprint_and_library_versions():
    env = {**numerics.environment(), "torch": "2.13.0+cpu", "transformers": "5.23.0"}
    rec = lambda **kw: {**env, **kw, "numerics_fingerprint": numerics.fingerprint({**env, **kw})}  # noqa: E731
    assert numerics.kind_of(rec(digest=REF)) == numerics.REFERENCE_KIND
    # made before machines recorded their digest: the reference's fingerprint, written on every kind by that code
    assert numerics.kind_of({**rec(), "digest": None, "cpu": "AMD EPYC (AVX-512)"}) == numerics.REFERENCE_KIND
    assert numerics.kind_of({**rec(), "digest": None, "cpu": "Intel(R) Xeon(R) Processor (AVX-512)"}) is None
    assert numerics.kind_of(rec(digest=INTEL)) == "Intel Xeon (AVX-512)"
    assert numerics.kind_of(rec(digest=UNMEASURED)) is None
    assert numerics.kind_of(rec(digest=REF, numerics="native")) is None
    assert numerics.kind_of(rec(digest=INTEL, transformers="9.9.9")) is None     # not measured with these
    assert numerics.kind_of(rec(digest=REF, transformers="9.9.9")) is None
    assert numerics.kind_of({"numerics_fingerprint": "AVX2|pinned|2.13.0+cpu|5.23.0"}) is None     # malformed
    assert numerics.kind_of(None) is None and numerics.kind_of({}) is None


def test_records_can_be_judged_as_the_reference_kind_judges_them(monkeypatch):
    from fedlab.evidence.records import stale_numerics
    from fedlab.validation import ConfigError

    env = numerics.environment()
    made_there = {"environment": {"numerics_fingerprint": numerics.fingerprint({**env, "digest": REF})}}
    made_here = {"environment": {"numerics_fingerprint": numerics.fingerprint({**env, "digest": UNMEASURED})}}
    _as_machine(monkeypatch, UNMEASURED)
    monkeypatch.setenv(numerics.JUDGE_ENV, "reference")
    assert not stale_numerics(made_there) and stale_numerics(made_here)
    monkeypatch.setenv(numerics.JUDGE_ENV, "here")
    assert not stale_numerics(made_there) and not stale_numerics(made_here)
    from fedlab.evidence.spotcheck import SpotCheckError, spot_check

    monkeypatch.setenv(numerics.JUDGE_ENV, "reference")
    with pytest.raises(SpotCheckError, match="a spot-check re-runs them here"):    # nothing runs under that view
        spot_check(None, [], 1)
    monkeypatch.setenv(numerics.JUDGE_ENV, "theirs")
    with pytest.raises(ConfigError, match="FEDLAB_JUDGE_NUMERICS='theirs' is not allowed; allowed: here, reference"):
        stale_numerics(made_there)
    monkeypatch.setenv(numerics.JUDGE_ENV, "reference")
    monkeypatch.setattr(numerics, "REFERENCE", {})
    numerics._fingerprint_judged.cache_clear()
    with pytest.raises(ConfigError, match="no reference digest was measured for torch"):
        stale_numerics(made_there)


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


def test_the_square_root_check_counts_the_values_not_correctly_rounded():
    """`numerics.sqrt_rounding` counts against the correctly rounded float32 square root: the double root rounded
    once is, and one that moves every fourth result by one unit in the last place loses those."""
    import torch

    n = numerics.SQRT_VALUES
    assert numerics.sqrt_rounding(lambda x: x.double().sqrt().float()) == (n, n)

    def off_by_one_ulp(x):
        y = x.double().sqrt().float()
        y[::4] = torch.nextafter(y[::4], torch.tensor(float("inf")))
        return y

    assert numerics.sqrt_rounding(off_by_one_ulp) == (n - n // 4, n)


def test_doctor_prints_the_digests(capsys):
    from fedlab.cli import main

    code = main(["doctor"])
    out = capsys.readouterr().out
    assert "digest threads=1: " in out and "digest threads=2: " in out and "cpu: " in out
    assert f"torch.sqrt: correctly rounded in {numerics.sqrt_rounding()[0]} of {numerics.SQRT_VALUES} values" in out
    from fedlab import idle_threads

    assert f"OpenMP idle threads (fedlab/idle_threads.py): {idle_threads.decision}\n" in out
    assert code == (0 if "records made on the reference kind reproduce here" in out else 1)


def test_fedlab_run_restarts_itself_in_the_mode_a_config_asks_for(monkeypatch):
    import subprocess as sp

    from fedlab.cli import main

    seen = {}
    monkeypatch.setattr(sp, "call", lambda cmd, env: seen.update(cmd=cmd, env=env) or 0)
    argv = ["run", str(Path(__file__).resolve().parents[2] / "experiments/defaults.yaml"), "model.name=pico-llama",
            "numerics=native"]
    assert main(argv) == 0
    assert seen["cmd"][1:] == ["-m", "fedlab.cli", *argv] and seen["env"]["FEDLAB_NUMERICS"] == "native"


def test_todo_offers_to_replace_unmeasured_numerics_only_from_a_measured_kind(monkeypatch):
    """A measured kind's records are current everywhere, so replacing records of unmeasured numerics with them
    is offered (`--replace-other-numerics` in `fedlab results --todo`'s commands); a machine of no measured
    kind would put numbers current only on itself in their place."""
    from fedlab.evidence.todo import replaces_other_numerics

    for machine, offered in ((REF, True), (INTEL, True), (UNMEASURED, False)):
        _as_machine(monkeypatch, machine)
        assert replaces_other_numerics() is offered
    monkeypatch.setenv(numerics.JUDGE_ENV, "reference")
    assert replaces_other_numerics()


def test_native_mode_or_a_pin_not_in_force_is_no_measured_kind_and_is_named_as_such(monkeypatch):
    _as_machine(monkeypatch, REF)
    assert numerics.this_kind() == numerics.REFERENCE_KIND and numerics.is_measured_kind()
    monkeypatch.setattr(numerics, "mode", lambda: "native")
    assert numerics.this_kind() is None and not numerics.is_measured_kind()
    assert numerics.here_words().startswith("FEDLAB_NUMERICS=native")
    monkeypatch.setattr(numerics, "mode", lambda: "pinned")
    monkeypatch.setattr(numerics, "in_force", lambda: False)
    assert numerics.this_kind() is None and "not in force" in numerics.here_words()
    monkeypatch.setattr(numerics, "in_force", lambda: True)
    _as_machine(monkeypatch, UNMEASURED)
    assert numerics.this_kind() is None and numerics.here_words() == f"numerics digest {UNMEASURED}, of no measured kind"
