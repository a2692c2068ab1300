"""One local SparkSession for every Spark test (tests/spark_session.py), and the Kafka broker of the broker tests."""

from __future__ import annotations

import pytest

from tests.spark_session import shared_spark_session


@pytest.fixture(scope="session")
def spark():
    session = shared_spark_session()
    yield session
    session.stop()


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """Apache Kafka's own broker, one KRaft node on loopback (infra_tools/kafka_broker.py), for one test module;
    stopped after it, leaving no process."""
    from infra_tools.kafka_broker import KafkaBroker

    started = KafkaBroker(tmp_path_factory.mktemp("kafka"))
    with started:
        yield started
    assert started.process is None
