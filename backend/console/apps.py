from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    name = "backend.console"
    label = "console"
    verbose_name = "Web console"
