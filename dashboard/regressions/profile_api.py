"""GET /api/alerts/<group>/profile/: what got slower from the culprit's parent to the culprit."""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET

from dashboard.regressions.sheriff.profiles import group_profile_comparison


@require_GET
def alert_group_profile(request: HttpRequest, group_id: int) -> JsonResponse:
    """{"base": sha, "head": sha, "ops": [{name, device, base_ms, head_ms, delta_ms, delta_pct, ...}]},
    the largest |delta_ms| first; 404 with a JSON error while the group has no pair of profiles."""
    found = group_profile_comparison(group_id=group_id)
    if found is None:
        return JsonResponse({"error": f"alert group {group_id} has no profiles yet"}, status=404)
    comparison = found.comparison
    return JsonResponse(
        {
            "base": comparison.base.run.commit.sha,
            "head": comparison.head.run.commit.sha,
            "suite": found.suite,
            "hardware_class": found.hardware_class,
            "base_run": comparison.base.run_id,
            "head_run": comparison.head.run_id,
            "step_ms": {"base": dict(comparison.base_step_ms), "head": dict(comparison.head_step_ms)},
            # What the server counted over each profiled load (tokens, prefix-cache hits, preemptions).
            "server_metrics": {
                "base": comparison.base.server_metrics,
                "head": comparison.head.server_metrics,
            },
            "ops": comparison.rows(),
        }
    )
