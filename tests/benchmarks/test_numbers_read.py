"""Numbers out of a query straight into an array (one packed value on PostgreSQL): the same rows a fetch
gives, and a NULL refused rather than read as a shifted row."""

import numpy as np
import pytest
from django.db import connection

from dashboard.benchmarks.bulk import numbers_read

pytestmark = pytest.mark.django_db

ROWS = (
    "SELECT * FROM (VALUES (1, 10.5, -1), (2, -0.25, 7), (3, 1e300, 2147483647)) AS t (a, b, c) WHERE a >= %s"
)


def test_a_query_of_numbers_is_read_into_an_array_with_its_parameters() -> None:
    found = numbers_read(sql=ROWS, params=[2], width=3)

    assert found.dtype == np.float64
    assert found.tolist() == [[2.0, -0.25, 7.0], [3.0, 1e300, 2147483647.0]]
    assert numbers_read(sql=ROWS, params=[9], width=3).shape == (0, 3)


def test_a_null_is_refused_rather_than_read_into_the_next_row() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("the packed read is PostgreSQL's")
    with pytest.raises(ValueError, match="without NULL"):
        numbers_read(sql="SELECT 1, NULL::float8 UNION ALL SELECT 2, 3.0", params=[], width=2)
