"""The local SparkSession of the test suite, built the same way wherever a test starts the JVM first
(tests/spark's fixture or an operations test): the job's static settings (glue_jobs.session.job_spark_conf,
as in Glue and the local runner), local[2], UTC (JVM and session), few shuffle partitions, no UI. Spark
reads the JVM options, jars and static settings once, when the first session starts; a later builder gets that
session as it is."""

from __future__ import annotations

import os

# The JVM options of the Spark JVMs the tests start as subprocesses: the local runner, the compaction CLI, the
# rehearsal's Glue runs, a reader of an Iceberg table. Each lives seconds to minutes on small data, and on a 2-core
# machine running four test runs at once CPU is what the suite waits for: with the JIT's first tier only and a
# one-thread collector such a JVM spends about 40% less CPU (docs/development.md "Test time" has the figures).
# The suite's own session (below) runs hundreds of tests in one JVM, where C2's compiled code pays back: it keeps
# both tiers and takes the one-thread collector only (SESSION_JVM_OPTIONS: about 10% less CPU, the same time). Spark's launcher adds SPARK_SUBMIT_OPTS to the options of the JVM it starts (launcher module,
# SparkSubmitCommandBuilder; test_jvm_options shows it on this line).
SUBPROCESS_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
SESSION_JVM_OPTIONS = "-XX:+UseSerialGC"
JVM_OPTIONS_VARIABLE = "SPARK_SUBMIT_OPTS"
DEVELOPERS_JVM_OPTIONS = os.environ.get(JVM_OPTIONS_VARIABLE)  # set before the run: these win


def use_short_lived_jvm_options() -> None:
    """Every Spark JVM a test starts from here on gets SUBPROCESS_JVM_OPTIONS, unless the environment already sets
    the variable (a developer's own options win)."""
    os.environ.setdefault(JVM_OPTIONS_VARIABLE, SUBPROCESS_JVM_OPTIONS)


def subprocess_jvm_options() -> str:
    """The options the tests' Spark subprocesses start with (SUBPROCESS_JVM_OPTIONS, or the developer's own)."""
    return os.environ.get(JVM_OPTIONS_VARIABLE, "")


def shared_spark_session():
    from glue_jobs.session import local_session
    from infra import jvm_functions

    jvm_functions.jar_path()  # the project's JVM functions of the current sources, on the classpath of the JVM about to start

    held = os.environ.get(JVM_OPTIONS_VARIABLE)
    if held == SUBPROCESS_JVM_OPTIONS:  # the long-lived JVM keeps the JIT's second tier
        os.environ[JVM_OPTIONS_VARIABLE] = SESSION_JVM_OPTIONS
    try:
        return local_session("streamlake-tests", master="local[2]",
                             settings={"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"})
    finally:
        if held is not None:
            os.environ[JVM_OPTIONS_VARIABLE] = held
