"""``manage.py analytics_runs [--limit N]``: recent runs, one JSON object a line."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from backend.analytics.management.commands.analytics_run import run_json
from backend.analytics.selectors import run_list


class Command(BaseCommand):
    help = "List recent analytics runs as JSON lines (newest first)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--limit", type=int, default=20)

    def handle(self, *args, limit: int, **options) -> None:
        for run in run_list(limit=limit):
            self.stdout.write(run_json(run))
