"""The local Spark the job tests run on is one of the Glue runtime lines the config allows."""

from __future__ import annotations

import re
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def _glue_spark_lines() -> dict[str, str]:
    """{Spark line: its requirements file}, read from infra/runtimes.py's LOCAL_SPARK_LINES literal without
    importing infra (these venvs have no CDK)."""
    text = (REPO_ROOT / "infra" / "runtimes.py").read_text()
    literal = re.search(r"^LOCAL_SPARK_LINES = \{(.*)\}$", text, re.M).group(1)
    return dict(re.findall(r'"(\d+\.\d+)": "([\w.-]+)"', literal))


def test_session_spark_line_belongs_to_a_supported_glue_version(spark):
    line = ".".join(spark.version.split(".")[:2])
    assert line in _glue_spark_lines(), f"Spark {spark.version} matches no Spark line in infra/runtimes.py"
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"


def test_every_glue_spark_line_has_a_pinned_test_environment():
    """make test runs tests/spark once per Glue Spark line: each line needs a pinned pyspark."""
    pins = {}
    for req in set(_glue_spark_lines().values()):
        match = re.search(r"^pyspark==(\d+\.\d+)\.\d+$", (REPO_ROOT / req).read_text(), re.M)
        assert match, f"{req} pins no pyspark"
        pins[match.group(1)] = req
    assert pins == _glue_spark_lines(), pins
    makefile = (REPO_ROOT / "Makefile").read_text()
    for req in pins.values():
        assert f"-r {req}" in makefile, f"the Makefile installs no environment from {req}"
