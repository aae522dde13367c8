"""The dense-vector cosine of a count sketch (fedlab/comm/sketch_theory.py), against the arithmetic by hand."""
import math

import pytest

from fedlab.comm.sketch_theory import dense_cosine, one_row_cosine


def test_one_row_cosine_by_hand():
    assert one_row_cosine(128, 30) == pytest.approx(1 / math.sqrt(1 + 127 / 30))      # 0.4372
    assert one_row_cosine(128, 127) == pytest.approx(1 / math.sqrt(2))


@pytest.mark.parametrize("cols", [11, 30, 61])
def test_the_simulated_one_row_sketch_meets_the_formula(cols):
    assert dense_cosine(128, 1, cols) == pytest.approx(one_row_cosine(128, cols), abs=0.01)


def test_the_median_of_three_rows_beats_one_row_of_its_width_and_loses_to_one_row_of_its_bytes():
    """Y = 3 rows of Z = 10 (ρ = 4.27): better than one row of 10 buckets (0.27), worse than the one row of 30
    buckets the same bytes buy (0.437) — why Y = 1 does better at equal ρ in Table 3."""
    three = dense_cosine(128, 3, 10)
    assert one_row_cosine(128, 10) + 0.05 < three < one_row_cosine(128, 30) - 0.02
