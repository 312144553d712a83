from django.apps import AppConfig


class WebConfig(AppConfig):
    name = "dashboard.web"
    label = "web"

    def ready(self) -> None:
        from dashboard import checks  # noqa: F401  (registers the start-up checks)
