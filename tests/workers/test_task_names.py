"""The dispatch module sends tasks by name: every name it uses must be a task the workers register."""

from dashboard import dispatch
from workers.celery import app


def test_every_name_the_dispatch_module_sends_is_a_registered_task() -> None:
    names = {
        value
        for value in vars(dispatch).values()
        if isinstance(value, str) and value.startswith("perfwatch.")
    }
    assert len(names) == 12
    assert names <= set(app.tasks)


def test_beat_only_schedules_registered_tasks() -> None:
    assert {entry["task"] for entry in app.conf.beat_schedule.values()} <= set(app.tasks)
