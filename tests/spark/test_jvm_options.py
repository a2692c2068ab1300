"""The suite's own Spark JVM keeps both JIT tiers (tests/spark_session.SESSION_JVM_OPTIONS); the JVMs its tests start
as subprocesses get SUBPROCESS_JVM_OPTIONS, both through Spark's launcher (SPARK_SUBMIT_OPTS)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.spark_session import (
    DEVELOPERS_JVM_OPTIONS,
    SESSION_JVM_OPTIONS,
    SUBPROCESS_JVM_OPTIONS,
    subprocess_jvm_options,
)


def _jvm_arguments(spark) -> list[str]:
    """The JVM's command line, read from /proc (the RuntimeMXBean's implementation class is not reachable through
    py4j on every line: Spark 3.3's refused it)."""
    pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    cmdline = Path(f"/proc/{pid}/cmdline")
    if not cmdline.exists():
        pytest.skip("no /proc here to read the JVM's command line from")
    return cmdline.read_bytes().decode().split("\0")


def test_the_shared_session_keeps_the_default_jit_and_subprocesses_get_the_short_lived_options(spark):
    arguments = _jvm_arguments(spark)
    assert "-Duser.timezone=UTC" in arguments  # the session's own driver options did reach this JVM
    assert not [a for a in arguments if a.startswith("-XX:TieredStopAtLevel")], arguments
    if not DEVELOPERS_JVM_OPTIONS:
        assert SESSION_JVM_OPTIONS in arguments
    # What every subprocess inherits, unless the developer set their own before the run.
    assert subprocess_jvm_options() == (DEVELOPERS_JVM_OPTIONS or SUBPROCESS_JVM_OPTIONS)

