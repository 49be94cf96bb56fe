"""``manage.py run_controller [--controller-id ID]``: run a controller (docs/controller.md).

Several may run; one holds the lease and acts, the others wait to take over. SIGTERM or
SIGINT stops the loop, releases the lease (a standby takes over at once) and exits 0."""

from __future__ import annotations

import logging
import os
import signal
import socket

from django.core.management.base import BaseCommand

from backend.cluster.controller import Controller


class Command(BaseCommand):
    help = "Run the cluster controller (one active at a time, by a lease in the database)."

    def add_arguments(self, parser):
        parser.add_argument(
            "--controller-id",
            default=f"{socket.gethostname()}-{os.getpid()}",
            help="this controller's name in the lease (default: host-pid)",
        )
        parser.add_argument("--lease-s", type=float, default=None)
        parser.add_argument("--tick-s", type=float, default=None)

    def handle(self, *args, controller_id, lease_s, tick_s, **options):
        logging.getLogger("backend.cluster").setLevel(logging.INFO)
        controller = Controller(controller_id, lease_s=lease_s, tick_s=tick_s)

        def on_signal(signum, frame):
            controller.stop.set()

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        self.stdout.write(f"controller {controller_id} started", ending="\n")
        self.stdout.flush()
        controller.run()
        self.stdout.write(f"controller {controller_id} stopped cleanly")
