"""Seed a database with a throughput history that drops 10 % at its last tenth; print the newest run's id.

Run as `python -m tests.faults.seed_history` with DATABASE_URL naming a migrated database: the faults
tests seed the PostgreSQL cluster they own, which the test database's fixtures do not reach.
"""

from __future__ import annotations

import os
from typing import cast

import django

COMMITS, STEP_AT = 40, 30


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
    django.setup()
    from dashboard.benchmarks.models import Commit, Suite
    from tests.factories import CommitFactory, SuiteFactory, run_with_values
    from tests.regressions.conftest import noisy

    suite = cast(Suite, SuiteFactory(name="faults-suite"))
    run = None
    for index in range(COMMITS):
        level = 1000.0 if index < STEP_AT else 900.0
        run = run_with_values(
            commit=cast(Commit, CommitFactory()),
            suite=suite,
            values={(16, "output_throughput_tok_s"): noisy(level, index)},
        )
    assert run is not None
    print(run.pk)


if __name__ == "__main__":
    main()
