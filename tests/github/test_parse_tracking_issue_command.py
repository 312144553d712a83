import dataclasses
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from dashboard.github.tracking import tracking_issue_parse

FIXTURES = Path(__file__).parent / "fixtures"
KIMI_K3_ISSUE = FIXTURES / "kimi-k3-tracking-issue.md"
REPOSITORY_ROOT = Path(__file__).parents[2]


def run_command(*args: str) -> list[dict[str, object]]:
    stdout = io.StringIO()
    call_command("parse_tracking_issue", *args, stdout=stdout)
    return json.loads(stdout.getvalue())


def test_prints_the_kimi_k3_prs_as_json_in_order_each_once():
    printed = run_command("--body-file", str(KIMI_K3_ISSUE), "--repo", "vllm-project/vllm")

    assert printed[:3] == [
        {"repo": "vllm-project/vllm", "number": 49870, "checked": None},
        {"repo": "vllm-project/vllm", "number": 50383, "checked": True},
        {"repo": "vllm-project/vllm", "number": 51146, "checked": True},
    ]
    assert {"repo": "flashinfer-ai/flashinfer", "number": 2087, "checked": False} in printed
    assert len(printed) == 15
    assert printed == [
        dataclasses.asdict(reference)
        for reference in tracking_issue_parse(body=KIMI_K3_ISSUE.read_text(), repo="vllm-project/vllm")
    ]


def test_body_with_no_prs_prints_an_empty_list(tmp_path):
    body = tmp_path / "issue.md"
    body.write_text("- [x] Make sure you already searched for relevant issues\n")

    assert run_command("--body-file", str(body), "--repo", "vllm-project/vllm") == []


def test_missing_body_file_is_refused_with_the_reason(tmp_path):
    with pytest.raises(CommandError, match=r"cannot read .*missing\.md: No such file or directory"):
        run_command("--body-file", str(tmp_path / "missing.md"), "--repo", "vllm-project/vllm")


def test_repository_that_is_not_owner_slash_name_is_refused():
    with pytest.raises(CommandError, match="repository must look like OWNER/NAME, got 'vllm'"):
        run_command("--body-file", str(KIMI_K3_ISSUE), "--repo", "vllm")


def test_manage_py_exits_non_zero_with_a_one_line_reason(tmp_path):
    completed = subprocess.run(
        [
            sys.executable,
            "manage.py",
            "parse_tracking_issue",
            "--body-file",
            str(tmp_path / "x.md"),
            "--repo",
            "a/b",
        ],
        cwd=REPOSITORY_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert completed.returncode != 0
    assert completed.stdout == ""
    assert completed.stderr.strip().splitlines() == [
        f"CommandError: cannot read {tmp_path / 'x.md'}: No such file or directory"
    ]


def test_manage_py_reads_the_body_from_stdin():
    completed = subprocess.run(
        [
            sys.executable,
            "manage.py",
            "parse_tracking_issue",
            "--body-file",
            "-",
            "--repo",
            "vllm-project/vllm",
        ],
        cwd=REPOSITORY_ROOT,
        input="- [x] #50383\n- [ ] ~~#50611~~\n",
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )

    assert json.loads(completed.stdout) == [{"repo": "vllm-project/vllm", "number": 50383, "checked": True}]
