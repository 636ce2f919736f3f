"""protocol.statistics.variance_component: the maximum-likelihood variance component the A/A
control's term pools from its two readings, against values worked by hand."""

from __future__ import annotations

import numpy as np
import pytest

from protocol import statistics


def test_one_piece_is_the_method_of_moments():
    # m = 4 on 7 df, c = 1, e = 1: (4 - 1) / 1
    assert statistics.variance_component([4.0], [7], [1.0], [1.0]) == pytest.approx([3.0], rel=1e-6)
    # c = 2: (4 - 1) / 2
    assert statistics.variance_component([4.0], [7], [2.0], [1.0]) == pytest.approx([1.5], rel=1e-6)


def test_a_mean_square_below_its_noise_reads_no_component():
    assert statistics.variance_component([[0.5, 0.2]], [7, 1], [1.0, 1.0], [1.0, 1.0])[0] == 0.0


def test_pieces_of_one_coefficient_pool_by_their_degrees_of_freedom():
    # (7 x 4 + 1 x 2) / 8 = 3.75, less e = 1
    v = statistics.variance_component([[4.0, 2.0]], [7, 1], [1.0, 1.0], [1.0, 1.0])
    assert v == pytest.approx([2.75], rel=1e-6)


def test_pieces_of_different_coefficients_meet_where_the_likelihood_is_flat():
    # m = (1, 6), df = (1, 1), c = (1, 2), e = (1, 2): the score sum c (m - s) / s^2 with
    # s = c v + e is -v / (v + 1)^2 + 2 (4 - 2 v) / (2 v + 2)^2 = (2 - 2 v) / (v + 1)^2,
    # zero at v = 1, positive below and negative above
    v = statistics.variance_component([[1.0, 6.0]], [1, 1], [1.0, 2.0], [1.0, 2.0])
    assert v == pytest.approx([1.0], rel=1e-6)


def test_rows_are_estimated_each_on_its_own():
    rows = statistics.variance_component(
        [[4.0, 2.0], [0.5, 0.2], [1.0, 6.0]], [[7, 1], [7, 1], [1, 1]], 1.0, [1.0, 1.0]
    )
    assert rows[0] == pytest.approx(2.75, rel=1e-6)
    assert rows[1] == 0.0
    # c = 1 for both pieces of the third row: (1 + 6) / 2 - 1
    assert rows[2] == pytest.approx(2.5, rel=1e-6)
    assert np.all(rows >= 0)
