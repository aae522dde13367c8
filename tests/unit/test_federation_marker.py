"""The `federation` marker holds: tests/conftest.py fails a test whose body runs a whole federation without it."""
from __future__ import annotations

from pathlib import Path

CONFTEST = Path(__file__).resolve().parents[1] / "conftest.py"

INNER = '''
import pytest


def _start_a_federation():
    import fedlab.runtime.federation as federation

    try:                        # counted when called; the bogus arguments then stop it at once
        federation.run_federation(None, None, None)
    except Exception:
        pass


def test_unmarked():
    _start_a_federation()


@pytest.mark.federation
def test_marked():
    _start_a_federation()


def test_no_federation():
    pass
'''


def test_a_test_that_runs_a_federation_without_the_marker_fails(pytester):
    pytester.makeconftest(CONFTEST.read_text())
    pytester.makepyfile(test_inner=INNER)
    pytester.makeini("[pytest]\nmarkers =\n    federation: runs a whole federation\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:xdist")
    result.assert_outcomes(passed=3, errors=1)
    result.stdout.fnmatch_lines(["*ERROR at teardown of test_unmarked*", "this test runs a whole federation: mark it @pytest.mark.federation"])
