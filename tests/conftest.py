"""Shared fixtures. Kept free of aws_cdk and moto imports: tests/spark also runs in the Spark 3.3 venv."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """Apache Kafka's own broker, one KRaft node on loopback (devtools/kafka_broker.py), for one test module;
    stopped after it, leaving no process."""
    from devtools.kafka_broker import KafkaBroker

    started = KafkaBroker(tmp_path_factory.mktemp("kafka"))
    with started:
        yield started
    assert started.process is None
