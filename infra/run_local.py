"""Run the whole service on one machine, on the embedded defaults (``make up``).

Starts, in order: ``migrate``; ``seed_demo --json`` (the demo organisation, owner and a new API
key); builds the web console when its sources changed (``npm ci`` + ``vite build`` into
``frontend/dist``; skipped when up to date or with ``--no-console-build``); the Django control
plane under Daphne (ASGI: the REST API, the console and its WebSockets); ``--brokers``
broker processes (``python -m brokernodes --control-plane URL --broker-id N``) with data
under ``<var>/brokers/N``, beside one controller (``manage.py run_controller``); then creates
the demo topic through the REST API, waits until its brokers serve it, and prints the API URL,
the one REST URL for produce and consume (the first broker: any broker forwards a call to the
partition's leader, docs/data-plane-api.md "One front door"), the demo credentials and a curl
line that produces a keyed record and one that consumes its partition. Every broker also
listens for Kafka's protocol (SASL_PLAINTEXT on ``--host``, ports ``--kafka-ports``): the
runner prints the Kafka bootstrap address and kcat lines that produce and consume with the
demo key (SASL/PLAIN: the key id is the user name, the secret the password).

Ctrl-C (SIGINT) or SIGTERM stops everything: brokers first (SIGTERM, they flush their logs),
then the control plane; every wait is bounded and a process that does not stop in time is
killed. If a child dies on its own, the others are stopped too and the exit status is 1.
Children run in their own sessions, so a terminal's Ctrl-C reaches only this runner, which
then stops them in that order.

Children die with the runner: each is recorded in ``<var>/run/children.json``, and a guard
process (``infra/run_guard.py``) stops them, in the same order and bounds, when the runner
ends without doing so (even kill -9). A new run first stops what an earlier one left
running (``infra/process_tree.py``), refuses to start beside a runner still alive on the
same ``--var-dir``, and names the program holding a port it needs instead of letting a child
fail with "address already in use".

Everything is configurable for tests: ``--host``, ``--port``, ``--broker-ports``, ``--kafka-ports``,
``--var-dir``, ``--state-file`` (a JSON file written once ready: URLs, key, curl lines, pids).
The cluster secret comes from ``SLUICE_CLUSTER_SECRET`` or is generated once into
``<var>/cluster-secret`` (mode 0600).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import offline_report
import portcheck
import process_tree

from brokernodes.records.partitioner import partition_for_key
from brokernodes.security.redaction import redact

ROOT = Path(__file__).resolve().parent.parent
READY_TIMEOUT_S = 60.0
DEMO_KEY = "hello"  # the printed produce line's record key
REPORT_AFTER_S = 10.0  # a wait this long says why (offline partitions), then every
REPORT_EVERY_S = 15.0  # this long when the reason changed
STOP_TIMEOUT_S = 15.0
# a broker's clean stop is a controlled shutdown (leadership moves away), then draining
# in-flight requests (at most its --shutdown timeout), then flushing: give it longer
BROKER_STOP_TIMEOUT_S = 20.0


def curl_lines(rest_url: str, key: str, cluster_id: str, topic: str, partition: int):
    """curl lines that produce a keyed record (the key picks the partition) and read that
    partition back, both through the one REST URL (whichever broker leads it)."""
    auth = shlex.quote("Authorization: Bearer " + key)
    body = json.dumps(
        {
            "key": {"type": "STRING", "data": DEMO_KEY},
            "value": {"type": "STRING", "data": "hello, sluice"},
        }
    )
    produce = (
        f"curl -sS -X POST -H {auth} -H 'Content-Type: application/json' "
        f"--data {shlex.quote(body)} {rest_url}/v3/clusters/{cluster_id}/topics/{topic}/records"
    )
    consume = f"curl -sS -H {auth} " + shlex.quote(
        f"{rest_url}/sluice/v1/topics/{topic}/partitions/{partition}/records?offset=0&format=text"
    )
    return produce, consume


def kcat_lines(bootstrap: str, key: str, topic: str) -> tuple[str, str]:
    """kcat command lines that produce one record to and read ``topic`` over the Kafka
    listeners with ``key`` (SASL/PLAIN: the key id is the user name, the secret the
    password)."""
    user, _, secret = key.partition(".")
    base = (
        f"kcat -b {shlex.quote(bootstrap)} -X security.protocol=SASL_PLAINTEXT "
        f"-X sasl.mechanism=PLAIN -X {shlex.quote('sasl.username=' + user)} "
        f"-X {shlex.quote('sasl.password=' + secret)} -t {shlex.quote(topic)}"
    )
    produce = f"echo 'hello, kafka' | {base} -P"
    consume = f"{base} -C -o beginning -e"
    return produce, consume


class Runner:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.var = Path(args.var_dir).resolve()
        self.procs: list[tuple[str, subprocess.Popen]] = []
        self.children: list[process_tree.Child] = []
        self.children_file = self.var / "run" / "children.json"
        self.guard: subprocess.Popen | None = None
        self.recording = False  # children_file is ours (no other live runner owns it)
        self.stopping = False
        self.python = args.python
        self.cp_url = f"http://{args.host}:{args.port}"
        self.env = dict(os.environ)
        self.env.update(
            {
                "DJANGO_SETTINGS_MODULE": "backend.settings.local",
                "SLUICE_VAR_DIR": str(self.var),
                "SLUICE_CLUSTER_SECRET": self.cluster_secret(),
                "PYTHONUNBUFFERED": "1",
            }
        )

    # --- helpers -----------------------------------------------------------------------

    def say(self, text: str = "") -> None:
        print(text, flush=True)

    def cluster_secret(self) -> str:
        if os.environ.get("SLUICE_CLUSTER_SECRET"):
            return os.environ["SLUICE_CLUSTER_SECRET"]
        self.var.mkdir(parents=True, exist_ok=True)
        path = self.var / "cluster-secret"
        if not path.exists():
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(secrets.token_urlsafe(32))
        return path.read_text().strip()

    def manage(self, *argv: str, timeout: float = 120) -> str:
        done = subprocess.run(
            [self.python, "manage.py", *argv],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if done.returncode != 0:
            raise SystemExit(f"manage.py {' '.join(argv)} failed:\n{done.stderr[-2000:]}")
        return done.stdout

    def spawn(
        self, name: str, argv: list[str], log: Path, stop_s: float = STOP_TIMEOUT_S
    ) -> subprocess.Popen:
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                argv,
                cwd=ROOT,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self.procs.append((name, proc))
        self.children.append(process_tree.record(name, proc.pid, stop_s))
        self.write_children()
        return proc

    # --- lifetimes (infra/process_tree.py) ---------------------------------------------

    def write_children(self) -> None:
        if not self.recording:
            return
        me = process_tree.record("runner", os.getpid(), 0)
        process_tree.write(self.children_file, me, self.children)

    def clear_earlier_run(self) -> None:
        """Refuse to run beside a live runner on the same data; stop what a dead one left."""
        runner, children = process_tree.read(self.children_file)
        if runner is not None and runner.pid != os.getpid() and process_tree.running(runner):
            raise SystemExit(
                f"another make up (runner pid {runner.pid}) is running with data under "
                f"{self.var}; stop it first (Ctrl-C in its terminal, or kill {runner.pid})"
            )
        left = [c for c in children if process_tree.running(c)]
        if left:
            names = ", ".join(f"{c.name} (pid {c.pid})" for c in left)
            self.say(f"An earlier run left {names} running; stopping them first.")
            process_tree.stop_in_order(left, self.say)
        self.children = []
        self.recording = True
        self.write_children()

    def start_guard(self) -> None:
        """The guard stops the children if this runner dies without doing so (run_guard.py)."""
        log = self.var / "logs" / "runner-guard.log"
        with open(log, "ab") as out:
            self.guard = subprocess.Popen(
                [self.python, ROOT / "infra" / "run_guard.py", "--children", self.children_file],
                stdin=subprocess.PIPE,  # our end closes when we die: the guard's signal
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def check_ports(self, wanted: list[int]) -> None:
        """Every port free (as the servers bind them, with SO_REUSEADDR: a port in
        TIME_WAIT is free), or say who holds it and what to do."""
        busy = [
            (port, portcheck.holder(port))
            for port in wanted
            if not portcheck.free(self.args.host, port)
        ]
        if busy:
            lines = [f"port {port} is in use{f' by {who}' if who else ''}" for port, who in busy]
            raise SystemExit(
                "; ".join(lines)
                + ". Stop that program, or choose other ports with --port and --broker-ports."
            )

    def http(self, method: str, url: str, body: dict | None = None, key: str | None = None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(url, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if key:
            req.add_header("Authorization", f"Bearer {key}")
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                return resp.status, json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    def wait_until(self, what: str, check, timeout: float | None = None, explain=None) -> object:
        """Until ``check()`` is truthy, at most ``timeout`` (``--ready-timeout``). While it
        is not, ``explain()`` (if given) says why every ``REPORT_EVERY_S``, when that
        changes, and in the timeout's message."""
        timeout = self.args.ready_timeout if timeout is None else timeout
        started = time.monotonic()
        deadline = started + timeout
        next_report, said = started + REPORT_AFTER_S, None
        while time.monotonic() < deadline:
            self.check_children()
            with contextlib.suppress(OSError, ValueError):
                result = check()
                if result:
                    return result
            if explain is not None and time.monotonic() >= next_report:
                text = self.explained(explain)
                if text and text != said:
                    self.say(f"Still waiting for {what} after {time.monotonic() - started:.0f} s.")
                    self.say(text)
                said, next_report = text or said, time.monotonic() + REPORT_EVERY_S
            time.sleep(0.2)
        detail = self.explained(explain) if explain is not None else None
        raise SystemExit(
            f"timed out after {timeout:.0f} s waiting for {what}"
            + (f"\n{detail}" if detail else "")
        )

    @staticmethod
    def explained(explain) -> str | None:
        try:
            return explain()
        except (OSError, ValueError, KeyError, TypeError) as e:
            return f"(could not ask the control plane why: {e})"

    def offline_partitions(self) -> str | None:
        """Which partitions are offline and why (infra/offline_report.py), the demo
        topic's first."""
        parts, controller = offline_report.fetch(self.cp_url, self.env["SLUICE_CLUSTER_SECRET"])
        logs = str(self.var / "logs")
        return offline_report.describe(parts, controller, logs, topic=self.args.topic)

    def check_children(self) -> None:
        for name, proc in self.procs:
            if proc.poll() is not None and not self.stopping:
                raise SystemExit(f"{name} exited with status {proc.returncode}; see its log")

    # --- start -------------------------------------------------------------------------

    def start(self) -> dict:
        a = self.args
        (self.var / "logs").mkdir(parents=True, exist_ok=True)
        self.say(f"Sluice: data and logs under {self.var}")
        self.clear_earlier_run()
        self.start_guard()
        broker_ports = [int(p) for p in a.broker_ports.split(",")][: a.brokers]
        kafka_ports = [int(p) for p in a.kafka_ports.split(",")][: a.brokers]
        if len(kafka_ports) < a.brokers:
            raise SystemExit(
                f"--kafka-ports names {len(kafka_ports)} ports for {a.brokers} brokers"
            )
        self.check_ports([a.port, *broker_ports, *kafka_ports])
        self.manage("migrate", "--noinput")
        demo = json.loads(self.manage("seed_demo", "--json").strip().splitlines()[-1])
        key = demo["api_key"]
        console = self.build_console() if a.console_build else "not rebuilt (--no-console-build)"
        server = [self.python, "-m", "daphne", "--bind", a.host, "--port", str(a.port)]
        server.append("backend.asgi:application")
        if os.environ.get("SLUICE_CONTROL_PLANE_SERVER") == "runserver":  # no WebSockets
            server = [self.python, "manage.py", "runserver", f"{a.host}:{a.port}", "--noreload"]
        self.spawn("control plane", server, self.var / "logs" / "control-plane.log")
        self.wait_until(
            "the control plane", lambda: self.http("GET", f"{self.cp_url}/readyz")[0] == 200
        )
        self.spawn(  # one controller (docs/controller.md): fencing, elections, rebalance
            "controller",
            [self.python, "manage.py", "run_controller", "--controller-id", "local"],
            self.var / "logs" / "controller.log",
        )
        for name, cmd in (  # the analytics (docs/analytics.md): Celery worker and beat
            ("analytics worker", ["worker", "--pool", "solo", "--loglevel", "INFO"]),
            ("analytics beat", ["beat", "--schedule", str(self.var / "celerybeat-schedule")]),
        ):
            self.spawn(
                name,
                [self.python, "-m", "celery", "-A", "backend", *cmd],
                self.var / "logs" / f"{name.replace(' ', '-')}.log",
            )
        # the live analytics job (docs/analytics.md, "Live analytics") when Spark can run:
        # it waits for the brokers, restarts itself from its checkpoint after a failure
        if os.environ.get("SLUICE_ANALYTICS_LIVE", "1") != "0" and (
            shutil.which("java") or os.environ.get("JAVA_HOME")
        ):
            self.spawn(
                "analytics live",
                [self.python, "manage.py", "analytics_live"],
                self.var / "logs" / "analytics-live.log",
            )
        ports = [int(p) for p in a.broker_ports.split(",")][: a.brokers]
        if len(ports) < a.brokers:
            raise SystemExit(f"--broker-ports names {len(ports)} ports for {a.brokers} brokers")
        for i, port in enumerate(ports, start=1):
            self.spawn(
                f"broker {i}",
                [
                    self.python,
                    "-m",
                    "brokernodes",
                    "--control-plane",
                    self.cp_url,
                    "--broker-id",
                    str(i),
                    "--host",
                    a.host,
                    "--port",
                    str(port),
                    "--data-dir",
                    str(self.var / "brokers" / str(i)),
                    "--kafka-port",  # SASL_PLAINTEXT: loopback only by default
                    str(kafka_ports[i - 1]),
                ],
                self.var / "logs" / f"broker-{i}.log",
                BROKER_STOP_TIMEOUT_S,
            )
        for port in ports:
            url = f"http://{a.host}:{port}"
            self.wait_until(
                f"broker {url}", lambda u=url: self.http("GET", f"{u}/readyz")[0] == 200
            )

        status, doc = self.http(
            "POST",
            f"{self.cp_url}/api/v1/topics/",
            {"name": a.topic, "partitions": a.partitions},
            key,
        )
        if status not in (201, 409):
            raise SystemExit(f"creating topic {a.topic!r} failed: {status} {doc}")

        def leader():
            status, meta = self.http(
                "GET", f"http://{a.host}:{ports[0]}/sluice/v1/metadata", key=key
            )
            for t in meta.get("topics", []) if status == 200 else []:
                if t["name"] == a.topic and t["partitions"][0]["leader"] >= 0:
                    lead = t["partitions"][0]["leader"]
                    urls = {b["id"]: b["url"] for b in meta["brokers"]}
                    return meta["cluster_id"], urls.get(lead)
            return None

        cluster_id, leader_url = self.wait_until(
            f"topic {a.topic!r} on the brokers", leader, explain=self.offline_partitions
        )
        # one URL for every REST and WebSocket call: the first broker forwards to leaders
        rest_url = f"http://{a.host}:{ports[0]}"
        partition = partition_for_key(DEMO_KEY.encode(), a.partitions)
        # the key's partition must be served (through the REST URL) before the lines work
        self.wait_until(
            f"{a.topic}-{partition} to be served through {rest_url}",
            lambda: (
                self.http(
                    "GET",
                    f"{rest_url}/sluice/v1/topics/{a.topic}/partitions/{partition}/offsets",
                    key=key,
                )[0]
                == 200
            ),
            explain=self.offline_partitions,
        )
        produce, consume = curl_lines(rest_url, key, cluster_id, a.topic, partition)
        bootstrap = ",".join(f"{a.host}:{p}" for p in kafka_ports)
        kcat_produce, kcat_consume = kcat_lines(bootstrap, key, a.topic)
        state = {
            "api_url": f"{self.cp_url}/api/v1/",
            "console_url": f"{self.cp_url}/",
            "docs_url": f"{self.cp_url}/api/docs/",
            "organisation": demo["organisation"],
            "username": demo["username"],
            "password": demo["password"],
            "api_key": key,
            "cluster_id": cluster_id,
            "topic": a.topic,
            "rest_url": rest_url,
            "brokers": [f"http://{a.host}:{p}" for p in ports],
            "leader_url": leader_url,
            "curl_produce": produce,
            "curl_consume": consume,
            "kafka_bootstrap": bootstrap,
            "kcat_produce": kcat_produce,
            "kcat_consume": kcat_consume,
            "pids": {name: p.pid for name, p in self.procs},
            "runner_pid": os.getpid(),
            "guard_pid": self.guard.pid if self.guard else None,
        }
        self.say()
        self.say("Sluice is up.")
        self.say(f"  API:        {state['api_url']}  (docs: {state['docs_url']})")
        self.say(f"  Console:    {state['console_url']}  (build: {console})")
        self.say(f"  Sign in:    {demo['username']} / {demo['password'] or '(unchanged)'}")
        self.say(f"  API key:    {key}   (shown once)")
        self.say(f"  REST:       {rest_url}  (produce and consume, every topic and partition)")
        self.say(f"  Topic:      {a.topic} ({a.partitions} partitions)")
        self.say(f"  Produce (key {DEMO_KEY!r}, its partition chosen by the key):")
        self.say(f"    {produce}")
        self.say(f"  Consume (partition {partition}, where that key lands):")
        self.say(f"    {consume}")
        self.say(f"  Kafka:      {bootstrap}")
        self.say(
            "              SASL_PLAINTEXT, SASL/PLAIN: user name = the key id (before the '.'),"
            " password = the secret (after it)"
        )
        self.say("  Kafka produce (kcat):")
        self.say(f"    {kcat_produce}")
        self.say("  Kafka consume (kcat):")
        self.say(f"    {kcat_consume}")
        self.say("Ctrl-C stops everything.")
        if a.state_file:
            tmp = f"{a.state_file}.tmp"
            with open(tmp, "w") as f:
                json.dump(state, f)
            os.replace(tmp, a.state_file)
        return state

    def build_console(self) -> str:
        """Build frontend/dist when a source is newer than it (npm ci first when the lock file
        is newer than node_modules). Without npm the control plane still runs; the console
        page then says how to build it."""
        front = ROOT / "frontend"
        dist = front / "dist" / "index.html"
        npm = shutil.which("npm")
        if npm is None:
            return "not built: npm is not installed"
        sources = [ROOT / "package-lock.json", front / "package.json", front / "index.html"]
        sources += [front / "vite.config.ts", *(front / "src").rglob("*")]
        newest = max((p.stat().st_mtime for p in sources if p.is_file()), default=0)
        if dist.exists() and dist.stat().st_mtime >= newest:
            return "up to date"
        installed = ROOT / "node_modules" / ".package-lock.json"
        lock = ROOT / "package-lock.json"
        if not installed.exists() or installed.stat().st_mtime < lock.stat().st_mtime:
            self.say("Installing the console's npm packages (npm ci)...")
            self.run_quiet([npm, "ci", "--no-audit", "--no-fund"], "npm ci", timeout=600)
        self.say("Building the console (vite build)...")
        self.run_quiet([npm, "run", "build", "--workspace", "frontend"], "vite build", timeout=300)
        return "built"

    def run_quiet(self, argv: list[str], what: str, timeout: float) -> None:
        done = subprocess.run(
            argv, cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=self.env
        )
        if done.returncode != 0:
            raise SystemExit(f"{what} failed:\n{(done.stdout + done.stderr)[-3000:]}")

    # --- stop --------------------------------------------------------------------------

    def stop(self) -> None:
        """Brokers first (they flush), then the rest; bounded waits, then kill
        (``process_tree.stop_in_order``); then the guard is let go."""
        self.stopping = True
        started = time.monotonic()

        def reap() -> None:
            for _, p in self.procs:
                p.poll()

        process_tree.stop_in_order(self.children, self.say, reap)
        for _, p in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=5)
        self.children = []
        self.write_children()
        if self.guard is not None:
            with contextlib.suppress(OSError):
                self.guard.stdin.close()  # type: ignore[union-attr]
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.guard.wait(timeout=5)
        self.say(f"Sluice stopped ({time.monotonic() - started:.1f} s).")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    env = os.environ.get
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--host", default=env("HOST", "127.0.0.1"))
    p.add_argument("--port", type=int, default=int(env("PORT", "8000")))
    p.add_argument("--brokers", type=int, default=3)
    p.add_argument("--broker-ports", default=env("SLUICE_BROKER_PORTS", "9092,9093,9094"))
    p.add_argument(
        "--kafka-ports",
        default=env("SLUICE_KAFKA_PORTS", "29092,29093,29094"),
        help="the brokers' Kafka listeners (SASL_PLAINTEXT), one port per broker",
    )
    p.add_argument("--var-dir", default=env("SLUICE_VAR_DIR", str(ROOT / "var")))
    p.add_argument("--topic", default="demo-events")
    p.add_argument("--partitions", type=int, default=3)
    p.add_argument("--state-file", default=None, help="write a JSON status file once ready")
    p.add_argument(
        "--ready-timeout",
        type=float,
        default=READY_TIMEOUT_S,
        help="seconds to wait for each process and the demo topic to be ready",
    )
    p.add_argument("--python", default=sys.executable)
    p.add_argument(
        "--no-console-build",
        dest="console_build",
        action="store_false",
        help="do not build the web console even when its sources changed",
    )
    return p.parse_args(argv)


class _Stop(Exception):
    pass


def main(argv: list[str] | None = None) -> int:
    runner = Runner(parse_args(argv))

    def on_signal(signum, frame):
        raise _Stop()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    status = 0
    try:
        runner.start()
        while True:
            time.sleep(0.5)
            runner.check_children()
    except _Stop:
        pass
    except SystemExit as e:
        # a child's failure output may hold a key or password: redact as the logs are
        print(f"Sluice: {redact(str(e))}", file=sys.stderr, flush=True)
        status = 1
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        runner.stop()
    return status


if __name__ == "__main__":
    sys.exit(main())
