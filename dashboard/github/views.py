"""GitHub's webhook: signed deliveries in, work queued for the control worker."""

from __future__ import annotations

import hashlib
import json
import re

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from dashboard.github.signatures import signature_verify
from dashboard.github.webhook import WEBHOOK_EVENTS, WebhookPayloadInvalid, webhook_delivery_handle

# GitHub's delivery ids are GUIDs; anything else is not from GitHub.
_DELIVERY_ID = re.compile(r"[A-Za-z0-9-]{1,100}")


@csrf_exempt
@require_POST
def webhook(request: HttpRequest) -> HttpResponse:
    """GitHub's deliveries: 403 unless signed with GITHUB_WEBHOOK_SECRET; 204 for events not listened to;
    202 when work was queued, 200 when there was none to do."""
    if not signature_verify(
        secret=settings.GITHUB_WEBHOOK_SECRET.encode(),
        body=request.body,
        header=request.headers.get("X-Hub-Signature-256"),
    ):
        return JsonResponse({"error": "missing or invalid X-Hub-Signature-256"}, status=403)
    event = request.headers.get("X-GitHub-Event", "")
    if event == "ping":
        return JsonResponse({"pong": True})
    if event not in WEBHOOK_EVENTS:
        return HttpResponse(status=204)
    delivery_id = request.headers.get("X-GitHub-Delivery", "")
    if not _DELIVERY_ID.fullmatch(delivery_id):
        return JsonResponse({"error": "missing or malformed X-GitHub-Delivery"}, status=400)
    try:
        payload = json.loads(request.body)
        if not isinstance(payload, dict):
            raise WebhookPayloadInvalid("the payload is not a JSON object")
        outcome = webhook_delivery_handle(
            delivery_id=delivery_id,
            event=event,
            payload=payload,
            body_sha256=hashlib.sha256(request.body).hexdigest(),
        )
    except (ValueError, TypeError) as error:  # WebhookPayloadInvalid and malformed JSON or values
        return JsonResponse({"error": f"unreadable {event} payload: {error}"}, status=400)
    if outcome.duplicate:
        return JsonResponse({"queued": [], "duplicate": True})
    return JsonResponse({"queued": list(outcome.queued)}, status=202 if outcome.queued else 200)
