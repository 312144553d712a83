from django.apps import AppConfig


class CapacityConfig(AppConfig):
    name = "dashboard.capacity"
    label = "capacity"
