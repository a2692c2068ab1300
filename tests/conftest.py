"""Shared fixtures. Kept free of aws_cdk and moto imports: tests/spark also runs in the Spark 3.3 venv."""

from __future__ import annotations

import pytest

from tests.spark_session import use_short_lived_jvm_options

use_short_lived_jvm_options()  # for the Spark JVMs the tests start as subprocesses (tests/spark_session.py)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """Apache Kafka's own broker, one KRaft node on loopback (devtools/kafka_broker.py), for one test module;
    stopped after it, leaving no process."""
    from devtools.kafka_broker import KafkaBroker

    started = KafkaBroker(tmp_path_factory.mktemp("kafka"))
    with started:
        yield started
    assert started.process is None
