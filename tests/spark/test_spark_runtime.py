"""The local Spark the job tests run on is one of the Glue runtime lines the config allows."""

from __future__ import annotations

import re
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def _glue_spark_lines() -> set[str]:
    # Read without importing infra (this venv may not have the CDK); the dict literal is the source.
    text = (REPO_ROOT / "infra" / "config.py").read_text()
    return set(re.findall(r'"spark": "(\d+\.\d+)"', text))


def test_session_spark_line_belongs_to_a_supported_glue_version(spark):
    line = ".".join(spark.version.split(".")[:2])
    assert line in _glue_spark_lines(), f"Spark {spark.version} matches no Glue runtime in infra/config.py"
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"


def test_every_glue_spark_line_has_a_pinned_test_environment():
    """make test runs tests/spark once per Glue Spark line: each line needs a pinned pyspark."""
    pins = {}
    for req in ("requirements-dev.txt", "requirements-spark33.txt"):
        match = re.search(r"^pyspark==(\d+\.\d+)\.\d+$", (REPO_ROOT / req).read_text(), re.M)
        assert match, f"{req} pins no pyspark"
        pins[match.group(1)] = req
    assert set(pins) == _glue_spark_lines(), pins
