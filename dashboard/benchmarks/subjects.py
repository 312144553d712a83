"""What a vLLM commit is, read from its message and the files it touched. Pure: no Django, no git.

vLLM squash-merges every PR, so a commit on main is one PR and its subject ends in ``(#N)``. Reverts made
with GitHub's button are titled ``Revert "<original subject>"`` and land as
``Revert "<original subject> (#123)" (#456)``: the revert is PR 456 and undoes PR 123.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from enum import StrEnum
from pathlib import PurePosixPath


class ChangeClass(StrEnum):
    """What a commit's files touch, lightest first (stored in ``Commit.change_class``)."""

    DOCS_TESTS_CI = "docs_tests_ci"  # never reaches an installed vLLM: cannot change its performance
    PYTHON = "python"
    NATIVE = "native"


_PR_SUFFIX = re.compile(r"\(#(?P<number>\d+)\)")
_REVERT_SUBJECT = re.compile(r"^\s*(?:\[[^\]]*\]\s*)*revert\b:?\s*(?P<rest>.*)$", re.IGNORECASE)
_TRAILING_PR_SUFFIX = re.compile(r"\s*\(#\d+\)\s*$")
_BARE_PR = re.compile(r"(?<![\w&])#(?P<number>\d+)(?!\w)")
# GitHub's revert button writes "Reverts owner/repo#123" as the first line of the PR body; people also
# write "This reverts #123", "Reverts PR #123" or the PR URL.
_REVERT_BODY = re.compile(
    r"^\s*(?:this\s+)?reverts?\s+(?:pr\s+|pull request\s+)?"
    r"(?:[\w.-]+/[\w.-]+#|#|https?://(?:www\.)?github\.com/[\w.-]+/[\w.-]+/pull/)(?P<number>\d+)\b",
    re.IGNORECASE | re.MULTILINE,
)

# Which files make a commit which class; see change_class_from_paths.
_DOCS_TESTS_CI_DIRECTORIES = frozenset({"docs", "tests", ".github", ".buildkite", "benchmarks", "examples"})
_DOCS_SUFFIXES = frozenset({".md", ".rst"})
_DOCS_TESTS_CI_FILES = frozenset(
    {
        "LICENSE",
        "CODEOWNERS",
        ".gitignore",
        ".gitattributes",
        ".pre-commit-config.yaml",
        ".readthedocs.yaml",
        ".markdownlint.yaml",
        ".clang-format",
        ".shellcheckrc",
        "mkdocs.yaml",
        "codecov.yml",
    }
)
_NATIVE_DIRECTORIES = frozenset({"csrc", "cmake", "docker", "requirements"})
_NATIVE_SUFFIXES = frozenset(
    {".c", ".cc", ".cpp", ".cxx", ".cu", ".cuh", ".h", ".hh", ".hpp", ".hxx", ".hip", ".inl", ".cmake"}
)
_NATIVE_FILES = frozenset(
    {"CMakeLists.txt", "setup.py", "setup.cfg", "pyproject.toml", "MANIFEST.in", "use_existing_torch.py"}
)
# Requirement files that only the test, docs and lint jobs install.
_NON_RUNTIME_REQUIREMENTS = re.compile(r"(?:.*test.*|docs|lint|dev)", re.IGNORECASE)
_WEIGHT: dict[ChangeClass, int] = {ChangeClass.DOCS_TESTS_CI: 0, ChangeClass.PYTHON: 1, ChangeClass.NATIVE: 2}


def message_split(*, message: str) -> tuple[str, str]:
    """Subject and body of a commit message as git's %s and %b see them.

    The subject is the first paragraph joined into one line; the body is the rest.
    """
    lines = message.strip("\n").split("\n")
    end = next((index for index, line in enumerate(lines) if not line.strip()), len(lines))
    subject = " ".join(line.strip() for line in lines[:end])
    return subject, "\n".join(lines[end:]).strip("\n")


def subject_title(*, subject: str) -> str:
    """A squash-merged commit's subject without its trailing ``(#N)``: the PR's title."""
    return _TRAILING_PR_SUFFIX.sub("", subject)


def subject_pr_number(*, subject: str) -> int | None:
    """The PR a squash-merged commit came from: the last ``(#N)`` of its subject, or None."""
    numbers = _PR_SUFFIX.findall(subject)
    return int(numbers[-1]) if numbers else None


def subject_reverted_pr(*, subject: str, body: str) -> int | None:
    """The PR this commit reverts, or None if it is not a revert of a known PR.

    Read from a ``Revert "... (#123)" (#456)`` subject (123; the last ``(#N)`` inside the quotes, so a
    revert of a revert names the revert it undoes), else from a ``Reverts owner/repo#123`` body line.
    """
    revert = _REVERT_SUBJECT.match(subject)
    if revert is not None:
        rest = revert.group("rest")
        first_quote, last_quote = rest.find('"'), rest.rfind('"')
        if 0 <= first_quote < last_quote:
            quoted = rest[first_quote + 1 : last_quote]
            # Only a "(#N)" suffix names the reverted PR: a bare "#N" in the old subject is often an issue.
            inner = _PR_SUFFIX.findall(quoted)
        else:
            # Unquoted: "Revert #123 (#456)" or "Revert PR #123"; the trailing (#N) is the revert's own PR.
            inner = _BARE_PR.findall(_TRAILING_PR_SUFFIX.sub("", rest))
        if inner:
            return int(inner[-1])
    from_body = _REVERT_BODY.search(body)
    return int(from_body.group("number")) if from_body else None


def change_class_from_paths(*, paths: Iterable[str]) -> ChangeClass:
    """The heaviest class among the files a commit touched (an empty change is ``docs_tests_ci``).

    ``native``: kernels and anything that changes how vLLM is built (C++/CUDA sources, CMake, setup.py,
    pyproject.toml, runtime requirements, Dockerfiles); a precompiled wheel of another commit is not
    valid across such a change. ``docs_tests_ci``: files that never reach an installed vLLM: docs,
    tests, CI configuration, Markdown anywhere, and the top-level ``benchmarks/`` and ``examples/``
    (scripts that drive vLLM but are not part of the package; ``vllm/benchmarks/`` is). ``python``:
    everything else, since an unknown file may well be read at run time.
    """
    heaviest = ChangeClass.DOCS_TESTS_CI
    for path in paths:
        change_class = _path_class(path)
        if _WEIGHT[change_class] > _WEIGHT[heaviest]:
            heaviest = change_class
            if heaviest == ChangeClass.NATIVE:
                break
    return heaviest


def _path_class(path: str) -> ChangeClass:
    parts = PurePosixPath(path).parts
    if not parts:
        return ChangeClass.DOCS_TESTS_CI
    name = parts[-1]
    suffix = PurePosixPath(name).suffix.lower()
    top = parts[0] if len(parts) > 1 else ""
    if top in _DOCS_TESTS_CI_DIRECTORIES or suffix in _DOCS_SUFFIXES or name in _DOCS_TESTS_CI_FILES:
        return ChangeClass.DOCS_TESTS_CI
    if top == "requirements" and _NON_RUNTIME_REQUIREMENTS.fullmatch(PurePosixPath(name).stem):
        return ChangeClass.DOCS_TESTS_CI
    if (
        top in _NATIVE_DIRECTORIES
        or suffix in _NATIVE_SUFFIXES
        or name in _NATIVE_FILES
        or name.startswith("Dockerfile")
    ):
        return ChangeClass.NATIVE
    return ChangeClass.PYTHON
