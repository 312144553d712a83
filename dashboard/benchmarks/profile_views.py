"""A run's profile trace, as a download that Perfetto (ui.perfetto.dev) opens as it is."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_GET

from dashboard.benchmarks.profiles import profile_trace_read


@require_GET
def run_profile_trace(request: HttpRequest, run_id: int) -> HttpResponse:
    """The gzip'd Chrome trace of run `run_id`'s profiling stage; 404 with a JSON error when it has none."""
    found = profile_trace_read(run_id=run_id)
    if found is None:
        return JsonResponse({"error": f"run {run_id} has no profile"}, status=404)
    profile, trace = found
    name = f"run-{run_id}-{profile.run.commit.short_sha}.pt.trace.json.gz"
    response = HttpResponse(trace, content_type="application/gzip")
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response
