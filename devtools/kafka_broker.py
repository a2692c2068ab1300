"""A real one-node Apache Kafka broker on loopback (KRaft, broker and controller in one process) for tests and demos.

    with KafkaBroker(workdir) as broker:       # starts it, waits until it serves
        broker.bootstrap_servers               # "127.0.0.1:<port>"
    # stopped: SIGTERM, then SIGKILL of its process group after a grace period; nothing left running

The broker is Kafka's own (`kafka.Kafka` from kafka_2.13, the jar set `kafka-broker` that `make bootstrap`
fetches from Maven Central, devtools/jars.py), on the Kafka line the config deploys. Its storage is formatted
with Kafka's StorageTool before the first start, as Kafka's KRaft quickstart does
(https://kafka.apache.org/39/documentation.html#quickstart_startserver: `kafka-storage.sh format -t <uuid> -c
server.properties`, then `kafka-server-start.sh`). The settings are the quickstart's KRaft server.properties
(config/kraft/server.properties of the 3.9 release) on free loopback ports, with replication factors of one.
"""

from __future__ import annotations

import base64
import contextlib
import os
import signal
import socket
import subprocess
import time
import uuid
from pathlib import Path

from devtools import jars

READY_LINE = "Kafka Server started"  # logged by KafkaRaftServer once the broker serves (kafka.server.KafkaRaftServer)


def free_port() -> int:
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def new_cluster_id() -> str:
    """A KRaft cluster id: a random UUID in URL-safe base64 without padding, as Kafka's Uuid.randomUuid() makes it,
    and like it never starting with '-' (which `kafka-storage format -t <id>` would take for an option: one id in 64
    did, and the broker failed to start)."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


# The JVM options of a broker that serves tests and the demo: small loads for minutes. The JIT's first tier only
# and a one-thread collector start it and run it on less CPU than the defaults (the figures of such JVMs are in
# docs/development.md "Test time"). A benchmark that loads the broker passes `jvm_options=()`.
SMALL_LOAD_JVM_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")


class KafkaBroker:
    def __init__(self, workdir: Path, *, java: str = "java", heap: str = "512m", start_timeout: float = 90,
                 settings: dict[str, str] | None = None, jvm_options: tuple[str, ...] = SMALL_LOAD_JVM_OPTIONS) -> None:
        self.workdir = Path(workdir)
        self.java = java
        self.heap = heap
        self.jvm_options = tuple(jvm_options)
        self.start_timeout = start_timeout
        self.port, self.controller_port = free_port(), free_port()
        self.settings = settings or {}
        self.process: subprocess.Popen | None = None
        self.log_path = self.workdir / "broker.log"

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _properties(self) -> dict[str, str]:
        return {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.workdir / "data"),
            "num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "auto.create.topics.enable": "false",
            **self.settings,
        }

    def start(self) -> KafkaBroker:
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = self.workdir / "server.properties"
        config.write_text("".join(f"{key}={value}\n" for key, value in self._properties().items()))
        log4j = self.workdir / "log4j.properties"
        log4j.write_text("log4j.rootLogger=INFO, stdout\nlog4j.appender.stdout=org.apache.log4j.ConsoleAppender\n"
                         "log4j.appender.stdout.layout=org.apache.log4j.PatternLayout\n"
                         "log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n\n")
        classpath = jars.classpath("kafka-broker")
        jvm = [self.java, *self.jvm_options, f"-Xmx{self.heap}", f"-Dlog4j.configuration=file:{log4j}", "-cp", classpath]
        if not (self.workdir / "data" / "meta.properties").exists():
            cluster_id = new_cluster_id()
            formatted = subprocess.run([*jvm, "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(config)],
                                       capture_output=True, text=True, timeout=120)
            if formatted.returncode:
                raise RuntimeError(f"formatting the broker's storage failed ({formatted.returncode}):\n"
                                   f"{formatted.stdout[-2000:]}{formatted.stderr[-2000:]}")
        self._log = open(self.log_path, "ab")  # noqa: SIM115 (closed in stop())
        # Its own process group: stop() reaches anything the JVM started, and a test's Ctrl-C does not.
        self.process = subprocess.Popen([*jvm, "kafka.Kafka", str(config)], stdout=self._log, stderr=subprocess.STDOUT,
                                        start_new_session=True)
        deadline = time.monotonic() + self.start_timeout
        while READY_LINE not in self.log_path.read_text(errors="replace"):
            if self.process.poll() is not None:
                self._close_log()
                raise RuntimeError(f"the Kafka broker exited ({self.process.returncode}) while starting; log: {self.log_path}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the Kafka broker did not start within {self.start_timeout:.0f} s; log: {self.log_path}")
            time.sleep(0.2)
        return self

    def stop(self, grace: float = 30) -> None:
        """SIGTERM (Kafka's controlled shutdown), then SIGKILL of the whole process group after `grace` seconds."""
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)  # anything of the group still there
        self._close_log()
        self.process = None

    def create_topic(self, name: str, partitions: int, configs: dict[str, str] | None = None) -> None:
        """Create a topic (replication factor 1: one broker), with topic-level `configs` such as the config's
        compression.type and retention.ms (infra.config MskConfig.topic_configs); waits until the broker has it."""
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers})
        topic = NewTopic(name, num_partitions=partitions, replication_factor=1, config=dict(configs or {}))
        admin.create_topics([topic])[name].result(timeout=30)
        del admin  # an rdkafka client: closed now, before the broker can stop

    def _close_log(self) -> None:
        with contextlib.suppress(AttributeError):
            self._log.close()

    def __enter__(self) -> KafkaBroker:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
