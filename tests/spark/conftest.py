"""One local SparkSession for every Spark test (tests/spark_session.py); the broker fixture is in tests/conftest.py."""

from __future__ import annotations

import pytest

from tests.spark_session import shared_spark_session


@pytest.fixture(scope="session")
def spark():
    session = shared_spark_session()
    yield session
    session.stop()


@pytest.fixture()
def iceberg_orders(tmp_path):
    """A datasets folder whose orders dataset says `"table_format": "iceberg"` (tests/spark/iceberg_support.py)."""
    from .iceberg_support import iceberg_datasets

    return iceberg_datasets(tmp_path)
