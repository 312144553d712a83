from django.apps import AppConfig


class TokensConfig(AppConfig):
    name = "dashboard.tokens"
    label = "tokens"
    verbose_name = "API tokens"
