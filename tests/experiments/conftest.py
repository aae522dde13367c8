"""Fixtures shared by the tests of the experiment tables."""
from __future__ import annotations

import pytest


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
