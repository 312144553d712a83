"""Screenshots of the overview, a timeline and an alert group, desktop and phone, into docs/."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from dashboard.regressions.models import AlertGroup, GroupKind

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run"]
VIEWPORTS = {"desktop": (1440, 900), "phone": (390, 844)}
CHARTS_DRAWN = "() => document.body.dataset.chartsDrawn === 'true'"
TIMEOUT_MS = 60_000


class Command(BaseCommand):
    help = (
        "Take screenshots of the overview, a suite's timeline and the largest regression's alert group, "
        "at 1440x900 and 390x844, from a running server (e.g. `make demo`), into docs/."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--base-url", default="http://127.0.0.1:8000", help="the running dashboard")
        parser.add_argument("--suite", default="kimi-k3-8k1k", help="the suite whose timeline to show")
        parser.add_argument("--out", default=str(Path(settings.BASE_DIR) / "docs"), help="folder to write to")
        parser.add_argument("--chromium", default=CHROMIUM, help="path of the Chromium executable")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            from playwright.sync_api import Error, sync_playwright
        except ImportError as error:
            raise CommandError("playwright is missing: pip install -e '.[dev]'") from error
        group = (
            AlertGroup.objects.exclude(kind=GroupKind.IMPROVEMENT).order_by("-magnitude_pct").first()
            or AlertGroup.objects.order_by("-magnitude_pct").first()
        )
        if group is None:
            raise CommandError("no alert group to show: load the demo (make demo) or run detect_alerts first")
        base_url = options["base_url"].rstrip("/")
        pages = {
            "overview": "/",
            "timeline": f"/suites/{options['suite']}/",
            "alert-group": f"/alerts/{group.pk}/",
        }
        out = Path(options["out"])
        out.mkdir(parents=True, exist_ok=True)
        with sync_playwright() as playwright:
            try:
                chromium = playwright.chromium.launch(executable_path=options["chromium"], args=CHROMIUM_ARGS)
            except Error as error:
                raise CommandError(f"Chromium did not start: {error.message.splitlines()[0]}") from error
            try:
                for device, (width, height) in VIEWPORTS.items():
                    page = chromium.new_page(viewport={"width": width, "height": height})
                    page.set_default_timeout(TIMEOUT_MS)
                    for name, path in pages.items():
                        try:
                            response = page.goto(base_url + path)
                            page.wait_for_function(CHARTS_DRAWN)
                        except Error as error:
                            reason = error.message.splitlines()[0]
                            raise CommandError(f"{base_url}{path}: {reason}") from error
                        if response is None or not response.ok:
                            status = response.status if response else "no response"
                            raise CommandError(f"{base_url}{path} answered {status}")
                        target = out / f"screenshot-{name}-{device}.png"
                        page.screenshot(path=str(target), full_page=device == "phone")
                        self.stdout.write(f"{target}")
                    page.close()
            finally:
                chromium.close()
