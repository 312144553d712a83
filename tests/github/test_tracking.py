from pathlib import Path

import pytest

from dashboard.github.tracking import (
    InvalidRepositoryName,
    PullReference,
    repository_validate,
    tracking_issue_parse,
)

FIXTURES = Path(__file__).parent / "fixtures"
VLLM = "vllm-project/vllm"


def parse(body: str) -> list[tuple[str, int, bool | None]]:
    return [(ref.repo, ref.number, ref.checked) for ref in tracking_issue_parse(body=body, repo=VLLM)]


def numbers(body: str) -> list[int]:
    return [ref.number for ref in tracking_issue_parse(body=body, repo=VLLM)]


def test_kimi_k3_tracking_issue_lists_its_prs_in_order_with_their_checked_state():
    body = (FIXTURES / "kimi-k3-tracking-issue.md").read_text()

    assert parse(body) == [
        (VLLM, 49870, None),
        (VLLM, 50383, True),
        (VLLM, 51146, True),
        (VLLM, 50484, True),
        (VLLM, 50585, True),
        (VLLM, 50656, True),
        (VLLM, 50912, True),
        (VLLM, 51070, True),
        (VLLM, 51311, True),
        (VLLM, 51725, True),
        (VLLM, 52388, False),
        (VLLM, 52789, True),
        ("flashinfer-ai/flashinfer", 2087, False),
        (VLLM, 53152, False),
        (VLLM, 53396, True),
    ]


def test_kimi_k3_tracking_issue_with_windows_line_endings_parses_the_same():
    body = (FIXTURES / "kimi-k3-tracking-issue.md").read_text()

    assert parse(body.replace("\n", "\r\n")) == parse(body)


def test_checked_and_unchecked_task_items_keep_their_state():
    body = "- [x] #1\n- [ ] #2\n- [X] #3\n"

    assert parse(body) == [(VLLM, 1, True), (VLLM, 2, False), (VLLM, 3, True)]


def test_star_plus_and_numbered_task_items_are_task_items():
    body = "* [x] #1\n+ [ ] #2\n1. [x] #3\n2) [ ] #4\n"

    assert parse(body) == [(VLLM, 1, True), (VLLM, 2, False), (VLLM, 3, True), (VLLM, 4, False)]


def test_reference_outside_a_task_list_has_no_checked_state():
    body = "Follow-up to #10.\n\n- plain bullet #11\n\n| PR | speedup |\n|---|---|\n| #12 | 1.3x |\n"

    assert parse(body) == [(VLLM, 10, None), (VLLM, 11, None), (VLLM, 12, None)]


def test_full_pr_urls_are_references_with_or_without_a_suffix():
    body = (
        "- [x] https://github.com/vllm-project/vllm/pull/100\n"
        "- [x] https://github.com/vllm-project/vllm/pull/101/files\n"
        "- [ ] https://github.com/vllm-project/vllm/pull/102/commits/3f1c2b9\n"
        "- [ ] https://github.com/vllm-project/vllm/pull/103#issuecomment-3141592653\n"
        "- [ ] <https://www.github.com/vllm-project/vllm/pull/104?w=1>.\n"
    )

    assert numbers(body) == [100, 101, 102, 103, 104]


def test_url_in_another_case_names_the_configured_repository():
    body = "- [x] https://github.com/vLLM-Project/vLLM/pull/7\n"

    assert parse(body) == [(VLLM, 7, True)]


def test_several_prs_on_one_line_come_in_order():
    body = "- [x] KDA checkpoints: #300, #200 and https://github.com/vllm-project/vllm/pull/100 (#400)\n"

    assert parse(body) == [(VLLM, 300, True), (VLLM, 200, True), (VLLM, 100, True), (VLLM, 400, True)]


def test_nested_items_keep_their_own_checked_state():
    body = "- [x] umbrella #1\n  - [ ] part one #2\n    - [x] part two #3\n  - notes #4\n"

    assert parse(body) == [(VLLM, 1, True), (VLLM, 2, False), (VLLM, 3, True), (VLLM, 4, None)]


def test_wrapped_task_item_carries_its_state_to_the_continuation_line():
    body = "- [x] Deferred MXFP4 finalization,\n  merged as\n  #52789\n"

    assert parse(body) == [(VLLM, 52789, True)]


def test_paragraph_after_a_task_list_has_no_checked_state():
    body = "- [x] #1\n\nSee also #2.\n"

    assert parse(body) == [(VLLM, 1, True), (VLLM, 2, None)]


def test_heading_right_after_a_task_item_has_no_checked_state():
    body = "- [ ] #1\n## Done in #2\n"

    assert parse(body) == [(VLLM, 1, False), (VLLM, 2, None)]


def test_struck_out_pr_is_dropped():
    body = "- [ ] ~~#50611~~ superseded by #50912\n"

    assert parse(body) == [(VLLM, 50912, False)]


def test_struck_out_pr_url_is_dropped():
    body = "- [x] ~~https://github.com/vllm-project/vllm/pull/50611~~ https://github.com/vllm-project/vllm/pull/50912\n"

    assert numbers(body) == [50912]


def test_strike_spanning_several_references_drops_all_of_them():
    body = "- [ ] ~~Rewind KDA state #50611 and #50612, then #50613~~ see #50912\n"

    assert numbers(body) == [50912]


def test_html_strike_tags_drop_their_references():
    body = "- [ ] <del>#1</del> <s>#2</s> <strike>#3</strike> #4\n"

    assert numbers(body) == [4]


def test_tildes_that_do_not_strike_keep_references():
    body = "- [x] ~ 2x faster with #1 ~ and #2 at ~~~ scale\n"

    assert numbers(body) == [1, 2]


def test_pr_first_struck_then_named_again_is_kept():
    body = "- [ ] ~~#5~~ first try\n- [x] #5 second try\n"

    assert parse(body) == [(VLLM, 5, True)]


def test_links_into_other_repositories_are_kept_apart():
    body = (
        "- [ ] upstream kernel https://github.com/flashinfer-ai/flashinfer/pull/2087\n"
        "- [x] guidellm support vllm-project/guidellm#412 and ours #412\n"
    )

    assert parse(body) == [
        ("flashinfer-ai/flashinfer", 2087, False),
        ("vllm-project/guidellm", 412, True),
        (VLLM, 412, True),
    ]


def test_cross_repo_reference_to_own_repository_is_the_same_pr_as_the_bare_one():
    body = "- [x] vllm-project/vllm#9\n- [ ] #9\n"

    assert parse(body) == [(VLLM, 9, True)]


def test_issue_urls_are_not_prs():
    body = (
        "- [ ] blocked on https://github.com/vllm-project/vllm/issues/50212\n"
        "- [ ] https://github.com/vllm-project/vllm/discussions/17 and "
        "https://github.com/vllm-project/vllm/commit/82a85dc1\n"
        "- [ ] https://github.com/vllm-project/vllm/pull/new/kimi-k3-dcp\n"
    )

    assert parse(body) == []


def test_checkboxes_without_a_pr_are_ignored():
    body = (
        "### Before submitting a new issue...\n\n"
        "- [x] Make sure you already searched for relevant issues, and asked the chatbot living at the "
        "bottom right corner of the [documentation page](https://docs.vllm.ai/en/latest/).\n"
        "- [ ] Benchmark on H200\n"
        "- [ ]\n"
    )

    assert parse(body) == []


def test_references_in_code_spans_are_ignored():
    body = "- [x] `#1` and ``a `#2` b`` and #3\n"

    assert numbers(body) == [3]


def test_references_in_fenced_code_blocks_are_ignored():
    body = (
        "```bash\n# reproduces #1\nvllm serve --pr #2\n```\n"
        "- [x] #3\n"
        "~~~~\n~~~\n#4\n~~~~\n"
        "  ```\n  #5\n  ```\n"
        "#6\n"
    )

    assert numbers(body) == [3, 6]


def test_unclosed_fence_hides_the_rest_of_the_body():
    body = "- [x] #1\n```\n- [x] #2\n"

    assert numbers(body) == [1]


def test_html_comments_are_ignored_on_one_line_and_across_lines():
    body = (
        "<!-- template: list PRs like - [ ] #123 -->\n"
        "- [x] #1 <!-- was #2 --> #3\n"
        "<!--\n- [ ] #4\n- [ ] #5 -->- [ ] #6\n"
    )

    assert numbers(body) == [1, 3, 6]


def test_markdown_link_to_a_pr_uses_its_target_not_its_text():
    body = "- [x] [#2087](https://github.com/flashinfer-ai/flashinfer/pull/2087) [[Perf] KDA](https://github.com/vllm-project/vllm/pull/51311)\n"

    assert parse(body) == [("flashinfer-ai/flashinfer", 2087, True), (VLLM, 51311, True)]


def test_markdown_link_to_an_issue_is_not_a_pr_even_with_a_number_as_text():
    body = "- [ ] [#50212](https://github.com/vllm-project/vllm/issues/50212)\n"

    assert parse(body) == []


def test_blockquoted_task_list_is_read():
    body = "> - [x] #1\n> - [ ] #2\n"

    assert parse(body) == [(VLLM, 1, True), (VLLM, 2, False)]


def test_each_pr_once_and_the_first_occurrence_wins():
    body = "- [ ] #7 first attempt\n- [x] #7 landed\n- [x] #8\n- [ ] #8 again\n"

    assert parse(body) == [(VLLM, 7, False), (VLLM, 8, True)]


def test_hashes_that_are_not_references_are_ignored():
    body = "## 1\n- [x] issue#1 &#35; &#123; C#2 ##3 #4a #0 x/#5 foo@bar/baz#6\n"

    assert parse(body) == []


def test_mentions_and_shas_are_not_references():
    body = "@WoosukKwon reviewed 82a85dc1 on 2026-09-13\n"

    assert parse(body) == []


def test_empty_body_has_no_references():
    assert tracking_issue_parse(body="", repo=VLLM) == []


def test_references_are_frozen_values():
    (reference,) = tracking_issue_parse(body="- [x] #1", repo=VLLM)

    assert reference == PullReference(repo=VLLM, number=1, checked=True)
    with pytest.raises(AttributeError):
        reference.number = 2  # type: ignore[misc]


@pytest.mark.parametrize("repo", ["vllm", "vllm-project/", "/vllm", "a/b/c", "vllm project/vllm", "o/..", ""])
def test_parse_refuses_a_repository_that_is_not_owner_slash_name(repo: str):
    with pytest.raises(InvalidRepositoryName, match="OWNER/NAME"):
        tracking_issue_parse(body="#1", repo=repo)


@pytest.mark.parametrize("repo", ["vllm-project/vllm", "flashinfer-ai/flashinfer", "octo/dotted.name_x"])
def test_repository_validate_accepts_owner_slash_name(repo: str):
    assert repository_validate(repo=repo) == repo
