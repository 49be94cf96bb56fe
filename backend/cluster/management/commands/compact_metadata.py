from django.core.management.base import BaseCommand

from backend.cluster import metadata_log


class Command(BaseCommand):
    help = "Compact the metadata log: drop superseded records and old tombstones."

    def add_arguments(self, parser):
        parser.add_argument("--keep-tombstones", type=int, default=1000)

    def handle(self, *args, keep_tombstones, **options):
        deleted = metadata_log.compact(keep_tombstones=keep_tombstones)
        self.stdout.write(f"deleted {deleted} records")
