from django.conf import settings
from django.http import HttpRequest


def site(request: HttpRequest) -> dict[str, object]:
    return {"perfwatch_demo": settings.PERFWATCH_DEMO}
