"""How the dashboard's connections to PostgreSQL are set up."""

import pytest
from django.db import connection

pytestmark = pytest.mark.django_db


def test_queries_are_planned_without_jit_compilation() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SHOW jit")
        assert cursor.fetchone() == ("off",)
