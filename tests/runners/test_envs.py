"""Cached environments: built once per key, published only when complete, never half reused."""

import sys
import threading
import time

import pytest

from runners.envs import COMPLETE_MARKER, EnvRecipe, EnvStep, cache_dir_resolve, env_ensure, env_ready
from runners.errors import Cancelled, CommandFailed


def recipe_writing(*, name: str, counter, fail_at: int | None = None, sleep_s: float = 0.0) -> EnvRecipe:
    """Steps that create {env}, count their runs in `counter`, and optionally fail or sleep."""
    count = f"open({str(counter)!r}, 'a').write('x')"
    steps = [
        EnvStep(argv=("mkdir", "-p", "{env}/bin"), timeout_s=30),
        EnvStep(argv=(sys.executable, "-c", count), timeout_s=30),
        EnvStep(argv=(sys.executable, "-c", f"import time; time.sleep({sleep_s})"), timeout_s=30),
        EnvStep(argv=("touch", "{env}/bin/tool"), timeout_s=30),
    ]
    if fail_at is not None:
        steps[fail_at] = EnvStep(
            argv=(sys.executable, "-c", "import sys; print('boom'); sys.exit(4)"), timeout_s=30
        )
    return EnvRecipe(name=name, steps=tuple(steps))


def test_cache_dir_comes_from_the_environment_variable(monkeypatch, tmp_path):
    monkeypatch.setenv("PERFWATCH_CACHE_DIR", str(tmp_path))
    assert cache_dir_resolve() == tmp_path
    monkeypatch.delenv("PERFWATCH_CACHE_DIR")
    assert cache_dir_resolve().parts[-2:] == (".cache", "perfwatch")


def test_environment_is_built_once_and_then_reused(tmp_path):
    counter = tmp_path / "runs"
    recipe = recipe_writing(name="demo", counter=counter)

    first = env_ensure(recipe=recipe, cache_dir=tmp_path, log_path=tmp_path / "a.log", timeout_s=60)
    second = env_ensure(recipe=recipe, cache_dir=tmp_path, log_path=tmp_path / "b.log", timeout_s=60)

    assert first == second == tmp_path / "envs" / recipe.key
    assert first.is_symlink() and (first / "bin" / "tool").is_file() and (first / COMPLETE_MARKER).is_file()
    assert counter.read_text() == "x"
    assert not (tmp_path / "b.log").exists()


def test_failed_step_leaves_nothing_that_would_be_reused(tmp_path):
    counter = tmp_path / "runs"
    recipe = recipe_writing(name="demo", counter=counter, fail_at=3)

    with pytest.raises(CommandFailed) as raised:
        env_ensure(recipe=recipe, cache_dir=tmp_path, log_path=tmp_path / "build.log", timeout_s=60)

    assert raised.value.returncode == 4
    assert "boom" in raised.value.log_tail
    assert env_ready(recipe=recipe, cache_dir=tmp_path) is None
    assert [path.name for path in (tmp_path / "envs").iterdir()] == [f".{recipe.key}.lock"]


def test_half_built_directory_from_a_killed_build_is_removed_and_rebuilt(tmp_path):
    counter = tmp_path / "runs"
    recipe = recipe_writing(name="demo", counter=counter)
    leftover = tmp_path / "envs" / f"{recipe.key}.deadbeef"
    (leftover / "bin").mkdir(parents=True)

    path = env_ensure(recipe=recipe, cache_dir=tmp_path, log_path=tmp_path / "build.log", timeout_s=60)

    assert not leftover.exists()
    assert path.resolve().parent == leftover.parent and path.resolve() != leftover


def test_build_past_its_timeout_fails_and_is_not_published(tmp_path):
    recipe = recipe_writing(name="slow", counter=tmp_path / "runs", sleep_s=30)
    started = time.monotonic()

    with pytest.raises(CommandFailed) as raised:
        env_ensure(recipe=recipe, cache_dir=tmp_path, log_path=tmp_path / "build.log", timeout_s=2)

    assert raised.value.timed_out
    assert time.monotonic() - started < 25  # the build step alone sleeps 30 s
    assert env_ready(recipe=recipe, cache_dir=tmp_path) is None


def test_cancelled_build_stops_and_is_not_published(tmp_path):
    recipe = recipe_writing(name="slow", counter=tmp_path / "runs", sleep_s=30)
    cancel = threading.Event()
    threading.Timer(1.0, cancel.set).start()

    with pytest.raises(Cancelled):
        env_ensure(
            recipe=recipe, cache_dir=tmp_path, log_path=tmp_path / "b.log", timeout_s=60, cancel=cancel
        )

    assert env_ready(recipe=recipe, cache_dir=tmp_path) is None


def test_a_changed_recipe_gets_another_environment():
    one = EnvRecipe(name="same", steps=(EnvStep(argv=("a", "{env}"), timeout_s=1),))
    other = EnvRecipe(name="same", steps=(EnvStep(argv=("b", "{env}"), timeout_s=1),))
    longer_timeout = EnvRecipe(name="same", steps=(EnvStep(argv=("a", "{env}"), timeout_s=99),))

    assert one.key != other.key
    assert one.key == longer_timeout.key
