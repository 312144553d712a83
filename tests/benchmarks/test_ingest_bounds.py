"""Hostile or impossible input to the ingest API is refused with a one-line 4xx and stores nothing."""

import base64
import json
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from dashboard.benchmarks import services
from dashboard.benchmarks.models import Commit, Measurement, Run, Runner, Series, Suite

pytestmark = pytest.mark.django_db

SHA = "82a85dc1" + "0" * 32


def _stored() -> dict[str, int]:
    models = (Commit, Suite, Runner, Run, Series, Measurement)
    return {model.__name__: model.objects.count() for model in models}


@pytest.fixture
def post(client: Client, bearer):
    headers = bearer("ingest:*+new-suites")

    def send(body: object, **extra: Any):
        data = body if isinstance(body, bytes | str) else json.dumps(body)
        return client.post("/api/runs/", data, content_type="application/json", headers=headers, **extra)

    return send


def _body(document: object, **fields: object) -> dict:
    return {"report": document, "commit": SHA, "suite": "tiny-llama-cpu", "hardware": "cpu", **fields}


def _refused(response, reason: str) -> None:
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert reason in error, error
    assert "\n" not in error
    assert _stored() == dict.fromkeys(_stored(), 0)


def _metrics(document: dict, level: int = 0) -> dict:
    return document["benchmarks"][level]["metrics"]


def _many_levels(document: dict, count: int) -> None:
    # The numbers a level needs, at distinct concurrencies: the 4.6 MB report had 5,000 of these.
    source = _metrics(document)
    metrics: dict = {"request_totals": source["request_totals"]}
    for rate in ("output_tokens_per_second", "requests_per_second"):
        metrics[rate] = {"total": {"mean": source[rate]["total"]["mean"]}}
    for latency in (
        "time_to_first_token_ms",
        "inter_token_latency_ms",
        "time_per_output_token_ms",
        "request_latency",
    ):
        successful = source[latency]["successful"]
        metrics[latency] = {
            "successful": {"mean": successful["mean"], "percentiles": successful["percentiles"]}
        }
    document["benchmarks"] = [
        {"config": {"strategy": {"streams": level}}, "metrics": metrics} for level in range(1, count + 1)
    ]


def _set_labels(document: dict, labels: object) -> dict:
    document.setdefault("config", {}).setdefault("metadata", {})["labels"] = labels
    return document


HOSTILE_REPORTS = {
    "negative throughput": (
        lambda d: _metrics(d)["output_tokens_per_second"]["total"].update(mean=-500),
        "output_throughput_tok_s is negative (-500)",
    ),
    "negative p99 latency": (
        lambda d: _metrics(d)["request_latency"]["successful"]["percentiles"].update(p99=-3),
        "latency_s_p99 is negative (-3)",
    ),
    "p50 above p99": (
        lambda d: _metrics(d)["time_to_first_token_ms"]["successful"]["percentiles"].update(p50=1e6),
        "ttft_ms_p50 (1e+06) is above ttft_ms_p90",
    ),
    "1e308": (
        lambda d: _metrics(d)["inter_token_latency_ms"]["successful"].update(mean=1e308),
        "itl_ms_mean is 1e+308, above the bound",
    ),
    "streams 2**40": (
        lambda d: d["benchmarks"][0]["config"]["strategy"].update(streams=2**40),
        "not a concurrency level from 1 to 100000",
    ),
    "5000 levels": (
        lambda d: _many_levels(d, 5000),
        "report has 5000 benchmark levels, over the limit of 32",
    ),
    "labels as a list": (lambda d: _set_labels(d, ["a", "b"]), "labels must be an object, not list"),
    "labels as a string": (lambda d: _set_labels(d, "a=b"), "labels must be an object, not str"),
    "too many labels": (lambda d: _set_labels(d, {f"k{i}": "v" for i in range(33)}), "over the limit of 32"),
    "long label value": (lambda d: _set_labels(d, {"k": "v" * 257}), "over the limit of 256"),
    "nested label value": (lambda d: _set_labels(d, {"k": {"x": 1}}), "label 'k' must be text, not dict"),
    "NUL in a label": (lambda d: _set_labels(d, {"k": "a\x00b"}), "holds a NUL character"),
    "lone surrogate in a label": (lambda d: _set_labels(d, {"k": "a\ud800b"}), "holds a lone surrogate"),
    "lone surrogate in a label name": (lambda d: _set_labels(d, {"\udfff": "v"}), "holds a lone surrogate"),
    "non-string guidellm_version": (
        lambda d: d["metadata"].update(guidellm_version={"x": 1}),
        "metadata.guidellm_version must be text, not dict",
    ),
    "long guidellm_version": (
        lambda d: d["metadata"].update(guidellm_version="9" * 51),
        "metadata.guidellm_version is 51 characters long",
    ),
}


@pytest.mark.parametrize("case", HOSTILE_REPORTS, ids=list(HOSTILE_REPORTS))
def test_hostile_report_is_refused_with_the_field_named(post, vllm_cpu_report, case) -> None:
    document = json.loads(vllm_cpu_report)
    mutate, reason = HOSTILE_REPORTS[case]
    mutate(document)
    _refused(post(_body(document)), reason)


def test_a_report_whose_levels_differ_from_its_suite_is_refused(post, vllm_cpu_report) -> None:
    Suite.objects.create(name="tiny-llama-cpu", hardware_class="cpu", concurrencies=[1, 2])
    response = post(_body(json.loads(vllm_cpu_report)))
    assert response.status_code == 400
    assert response.json()["error"] == (
        "invalid report: unexpected concurrency level(s) [4] (the suite's are [1, 2])"
    )
    assert Run.objects.count() == Series.objects.count() == 0


def test_series_per_suite_are_capped(post, vllm_cpu_report, monkeypatch) -> None:
    monkeypatch.setattr(services, "MAX_SERIES_PER_SUITE", 100)
    assert post(_body(json.loads(vllm_cpu_report))).status_code == 201
    before = _stored()
    response = post(_body(json.loads(vllm_cpu_report), hardware="other-cpu"))
    assert response.status_code == 400
    assert "would hold 126 series, over the limit of 100" in response.json()["error"]
    assert _stored() == before


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"commit": 12345678}, "field 'commit': Input should be a valid string"),
        ({"suite": ["a"]}, "field 'suite': Input should be a valid string"),
        ({"hardware": "h" * 51}, "field 'hardware': its length 51 is over the limit of 50"),
        ({"suite": "s" * 101}, "field 'suite': its length 101 is over the limit of 100"),
        ({"commit": "a\x00b"}, "field 'commit': Value error, the text holds a NUL character"),
        ({"suite": "a\ud800b"}, "field 'suite': Value error, the text holds a lone surrogate"),
        ({"commit": "zz"}, "invalid commit sha"),
    ],
)
def test_wrong_types_and_lengths_of_fields_are_refused(post, vllm_cpu_report, fields, reason) -> None:
    _refused(post(_body(json.loads(vllm_cpu_report), **fields)), reason)


def test_deeply_nested_json_is_refused(post) -> None:
    _refused(post('{"report": ' + "[" * 100_000 + "]" * 100_000 + "}"), "nested too deeply")


def test_deeply_nested_report_is_refused(post) -> None:
    nested = '{"metadata": {"version": 2}, "benchmarks": ' + "[" * 100_000 + "]" * 100_000 + "}"
    _refused(post(_body(base64.b64encode(nested.encode()).decode())), "nested too deeply")


class _Unreadable:
    def read(self, *args):
        raise AssertionError("the body was read")

    readline = read


def test_size_is_checked_from_content_length_before_the_body_is_read(post, settings) -> None:
    settings.PERFWATCH_MAX_REPORT_BYTES = 1000
    response = post(b"", CONTENT_LENGTH="800000000", **{"wsgi.input": _Unreadable()})
    assert response.status_code == 413
    assert response.json()["error"] == "request body of 800000000 bytes is over the limit of 66869"
    assert _stored() == dict.fromkeys(_stored(), 0)


def test_an_anonymous_huge_body_is_refused_before_it_is_read(client: Client) -> None:
    unreadable: dict[str, Any] = {"CONTENT_LENGTH": "800000000", "wsgi.input": _Unreadable()}
    response = client.post("/api/runs/", b"", content_type="application/json", **unreadable)
    assert response.status_code == 401


def test_a_multipart_report_over_the_limit_is_refused_by_its_size(client, bearer, settings, vllm_cpu_report):
    # The body fits the envelope limit, the report file alone does not: refused without parsing it.
    settings.PERFWATCH_MAX_REPORT_BYTES = len(vllm_cpu_report) - 1
    upload = SimpleUploadedFile("report.json", vllm_cpu_report, content_type="application/json")
    response = client.post(
        "/api/runs/",
        {"report": upload, "commit": SHA, "suite": "s", "hardware": "cpu"},
        headers=bearer("ingest:*+new-suites"),
    )
    assert response.status_code == 400
    assert f"report is {len(vllm_cpu_report)} bytes, over the limit" in response.json()["error"]


@pytest.mark.parametrize(
    "url",
    [
        "/commits/abc%00def/",
        "/suites/tiny%00/",
        "/suites/?q=%00",
        "/runs/?status=%00",
        "/alerts/?suite=a%00b",
        "/api/commits/ab%00/measurements/",
        "/compare/?base=a%00&head=b",
        "/tracking/own%00er/repo/1/",
        "/admin/login/?next=/%00",
    ],
)
def test_nul_bytes_in_a_url_or_query_string_get_400(client: Client, url) -> None:
    response = client.get(url)
    assert response.status_code == 400
    assert b"NUL character in the URL" in response.content


def test_a_multipart_report_is_streamed_to_disk_not_held_in_memory(client, bearer, settings, vllm_cpu_report):
    from django.core.files.uploadhandler import TemporaryFileUploadHandler

    from dashboard.benchmarks import api

    # Above this size Django writes a file part to a temporary file as it arrives, chunk by chunk.
    settings.FILE_UPLOAD_MAX_MEMORY_SIZE = 64 * 1024
    seen: list[type] = []
    original = api._multipart_report

    def spy(request):
        result = original(request)
        seen.append(type(request.FILES["report"]))
        return result

    upload = SimpleUploadedFile("report.json", vllm_cpu_report, content_type="application/json")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(api, "_multipart_report", spy)
        response = client.post(
            "/api/runs/",
            {"report": upload, "commit": SHA, "suite": "s", "hardware": "cpu"},
            headers=bearer("ingest:*+new-suites"),
        )
    assert response.status_code == 201, response.content
    assert TemporaryFileUploadHandler in [type(h) for h in response.wsgi_request.upload_handlers]
    assert seen and seen[0].__name__ == "TemporaryUploadedFile"


@pytest.mark.parametrize("scope", ["ingest:*", "ingest:tiny-llama-cpu", "runner:cpu/cpu-node-1"])
def test_an_unknown_suite_is_refused_unless_the_token_may_create_suites(
    client: Client, bearer, vllm_cpu_report, scope
) -> None:
    body = json.dumps(_body(json.loads(vllm_cpu_report)))

    refused = client.post("/api/runs/", body, content_type="application/json", headers=bearer(scope))

    assert refused.status_code == 400 and "unknown suite 'tiny-llama-cpu'" in refused.json()["error"]
    assert _stored() == dict.fromkeys(_stored(), 0)
    allowed = bearer(scope.replace("ingest:*", "ingest:*+new-suites"), name="creator")
    if scope == "ingest:*":
        created = client.post("/api/runs/", body, content_type="application/json", headers=allowed)
        assert created.status_code == 201 and Suite.objects.filter(name="tiny-llama-cpu").exists()


def test_a_suite_made_by_an_ingest_is_never_scheduled(post, vllm_cpu_report) -> None:
    from dashboard.benchmarks.scheduling import runs_schedule_all
    from tests.factories import CommitFactory

    assert post(_body(json.loads(vllm_cpu_report))).status_code == 201
    CommitFactory(sha="1" * 40, position=10, change_class="python")

    assert runs_schedule_all() == []
    assert not Run.objects.filter(status="queued").exists()
