"""One local SparkSession for every Spark test (tests/spark_session.py); the broker fixture is in tests/conftest.py."""

from __future__ import annotations

import pytest

from tests.spark_session import shared_spark_session


@pytest.fixture(scope="session")
def spark():
    session = shared_spark_session()
    yield session
    session.stop()
