from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from dashboard.benchmarks.run_selectors import run_reproduce_script


class Command(BaseCommand):
    help = (
        "Write the commands a run recorded (failed runs too) as one bash script that reproduces it by hand "
        "in a fresh directory, on a free port: install, model, serve, warm-up, benchmark."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("run_id", help="the run's number, as on /runs/<id>/")
        parser.add_argument("--output", type=Path, help="write the script here (default: standard output)")

    def handle(self, *args: Any, **options: Any) -> None:
        run_id = str(options["run_id"])
        if not run_id.isdigit():
            raise CommandError(f"{run_id!r} is not a run number")
        script = run_reproduce_script(run_id=int(run_id))
        if script is None:
            raise CommandError(f"run {run_id} does not exist or recorded no commands")
        output: Path | None = options["output"]
        if output is None:
            self.stdout.write(script, ending="")
            return
        try:
            output.write_text(script)
            output.chmod(0o755)
        except OSError as error:
            raise CommandError(f"cannot write {output}: {error.strerror}") from None
        self.stdout.write(f"wrote {output}")
