"""The demo as `make demo` loads it, loaded once for every test of this package (a minute and a half of
detection and verification runs) and rolled back when the package is done (`tests.conftest.loaded_once`)."""

from __future__ import annotations

from collections.abc import Iterator
from io import StringIO

import pytest
from django.core.management import call_command
from django.test import override_settings

from tests.conftest import loaded_once

# What `make demo` runs before `profile_demo` (which the profile tests run on top, in their savepoint).
DEMO_COMMANDS = ("load_demo", "load_demo_github", "detect_alerts", "verify_demo")


@pytest.fixture(scope="package")
def demo_verified(django_db_setup, django_db_blocker) -> Iterator[None]:
    with loaded_once(django_db_blocker), override_settings(PERFWATCH_DEMO=True):
        for command in DEMO_COMMANDS:
            call_command(command, stdout=StringIO())
        yield


@pytest.fixture
def demo_settings(demo_verified, settings) -> None:
    """The demo's data, and its settings for the test itself."""
    settings.PERFWATCH_DEMO = True
