"""PR references in the Markdown body of a GitHub tracking issue.

Pure: no Django, no network. The parser follows what GitHub renders, not what the raw text says: code,
HTML comments and struck-out text are not references a reader sees, so they are not references here.
It reads line by line, so two things GitHub renders are not modelled: a strike or code span that wraps
onto the next line, and 4-space indented code blocks (which look like nested list items line by line).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_REPOSITORY_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}")


class InvalidRepositoryName(ValueError):
    """A repository was not given as ``OWNER/NAME``."""


@dataclass(frozen=True)
class PullReference:
    """One PR named by a tracking issue. ``checked`` is None outside a task list."""

    repo: str
    number: int
    checked: bool | None


def repository_validate(*, repo: str) -> str:
    """Return ``repo`` if it is a GitHub ``OWNER/NAME``, else raise InvalidRepositoryName."""
    if not _REPOSITORY_NAME.fullmatch(repo) or repo.endswith((".", "/")) or ".." in repo:
        raise InvalidRepositoryName(f"repository must look like OWNER/NAME, got {repo!r}")
    return repo


# A list item: optional blockquote markers, indentation, a bullet or an ordinal, then the content.
_LIST_ITEM = re.compile(r"^(?P<indent>[ \t]*)(?P<marker>[-*+]|\d{1,9}[.)])(?P<gap>[ \t]+|$)(?P<rest>.*)$")
_TASK_BOX = re.compile(r"^\[(?P<state>[ xX])\](?:[ \t]+|$)")
_BLOCKQUOTE = re.compile(r"^[ \t]{0,3}(?:>[ \t]?)+")
_HEADING = re.compile(r"^[ \t]{0,3}#{1,6}(?:[ \t]|$)")
_FENCE_OPEN = re.compile(r"^[ \t]*(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
# Backtick runs open and close a code span only with a run of the same length (CommonMark).
_CODE_SPAN = re.compile(r"(?<!`)(?P<ticks>`+)(?!`).+?(?<!`)(?P=ticks)(?!`)")
# GFM strikethrough: ``~~`` that opens before a non-space and closes after one; HTML strike tags too.
_STRIKE = re.compile(
    r"(?<!~)~~(?=[^\s~]).*?(?<=[^\s~])~~(?!~)|<(?P<tag>del|s|strike)\b[^>]*>.*?</(?P=tag)\s*>",
    re.IGNORECASE,
)
# A Markdown link whose target is on GitHub: its text (often "#123") says less than its target.
_GITHUB_LINK = re.compile(
    r"\[(?:[^\[\]]|\[[^\[\]]*\])*\]\((?P<url><?https?://(?:www\.)?github\.com/[^)\s]*>?)[^)]*\)"
)
_REFERENCE = re.compile(
    r"""
    https?://(?:www\.)?github\.com/(?P<url_repo>[\w.-]+/[\w.-]+)/(?P<kind>pull|issues|discussions|commit)
        /(?P<url_number>\w+)(?:[/?#][^\s<>()\[\]"']*)?
    | (?<![\w/.@-])(?P<cross_repo>[A-Za-z0-9][\w-]*/[\w.-]+?)\#(?P<cross_number>\d+)(?!\w)
    | (?<![\w&#/])\#(?P<number>\d+)(?!\w)
    """,
    re.VERBOSE,
)


def tracking_issue_parse(*, body: str, repo: str) -> list[PullReference]:
    """The PRs a tracking-issue body names, in order of appearance, each (repo, number) once.

    ``repo`` is the repository the issue lives in: bare ``#N`` refers to it. A PR that appears twice keeps
    its first occurrence (and that occurrence's checked state).
    """
    repository_validate(repo=repo)
    found: dict[tuple[str, int], PullReference] = {}
    for text, checked in _visible_lines(body):
        for reference_repo, number in _references_in(text, repo=repo):
            key = (reference_repo.casefold(), number)
            if key not in found:
                found[key] = PullReference(repo=reference_repo, number=number, checked=checked)
    return list(found.values())


def _references_in(text: str, *, repo: str) -> list[tuple[str, int]]:
    text = _GITHUB_LINK.sub(lambda match: " " + match.group("url").strip("<>") + " ", text)
    references: list[tuple[str, int]] = []
    for match in _REFERENCE.finditer(text):
        if match.group("url_repo"):
            # Issue, discussion and commit links are not PRs; GitHub would redirect /issues/N for a PR,
            # but the author chose to link an issue, and guessing would pull unrelated issues in.
            if match.group("kind") != "pull" or not match.group("url_number").isdigit():
                continue
            reference_repo, number = match.group("url_repo"), int(match.group("url_number"))
        elif match.group("cross_repo"):
            reference_repo, number = match.group("cross_repo"), int(match.group("cross_number"))
        else:
            reference_repo, number = repo, int(match.group("number"))
        if number == 0:
            continue
        if reference_repo.casefold() == repo.casefold():
            reference_repo = repo
        references.append((reference_repo, number))
    return references


def _visible_lines(body: str) -> list[tuple[str, bool | None]]:
    """Each line's rendered text (no code, comments or struck-out text) and its task-list state.

    The state of a task item carries over to its continuation lines (wrapped text under the same item)
    and ends at the next list item or at a paragraph that is not indented into the item.
    """
    lines: list[tuple[str, bool | None]] = []
    fence: str | None = None
    in_comment = False
    checked: bool | None = None
    item_content_indent = 0
    after_blank = False
    for raw_line in body.splitlines():
        line = _BLOCKQUOTE.sub("", raw_line)
        if fence is not None:
            stripped = line.strip()
            if stripped.startswith(fence) and set(stripped) == {fence[0]}:
                fence = None
            continue
        if in_comment:
            end = line.find("-->")
            if end < 0:
                continue
            line = line[end + 3 :]
            in_comment = False
        fence_open = _FENCE_OPEN.match(line)
        if fence_open and not (fence_open.group("fence")[0] == "`" and "`" in fence_open.group("info")):
            fence = fence_open.group("fence")
            continue
        line = _CODE_SPAN.sub(" ", line)
        line, in_comment = _without_comments(line)
        if not line.strip():
            after_blank = True
            continue
        item = _LIST_ITEM.match(line)
        if item:
            box = _TASK_BOX.match(item.group("rest"))
            checked = None if box is None else box.group("state") != " "
            item_content_indent = len(item.group("indent")) + len(item.group("marker")) + 1
            content = item.group("rest")[box.end() :] if box else item.group("rest")
        else:
            indent = len(line) - len(line.lstrip(" \t"))
            if _HEADING.match(line) or (after_blank and indent < item_content_indent):
                checked, item_content_indent = None, 0
            content = line
        after_blank = False
        lines.append((_STRIKE.sub(" ", content), checked))
    return lines


def _without_comments(line: str) -> tuple[str, bool]:
    """The line with its HTML comments removed, and whether a comment stays open past its end."""
    kept: list[str] = []
    while True:
        start = line.find("<!--")
        if start < 0:
            kept.append(line)
            return "".join(kept), False
        kept.append(line[:start])
        end = line.find("-->", start + 4)
        if end < 0:
            return "".join(kept), True
        line = line[end + 3 :]
