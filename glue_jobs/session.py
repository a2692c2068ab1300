"""Spark settings of the job code: the static ones every session that runs it starts with (Glue, the local
runner, the tests), and SQL settings changed for one piece of work and restored afterwards."""

from __future__ import annotations

import contextlib

# Spark keeps the classes it generates for a stage in a cache of 100 entries (a static setting, read once per
# JVM), split into 4 segments that evict on their own, so it holds fewer in practice. One micro-batch uses
# ~75 (validation, cache, counts, two writers, duplicate ranking); with the default, each 1M-record batch of
# the local runner generated and compiled 19-21 of them anew (Janino), and the JVM compiled their hot
# methods again from cold: a stage's 84 KB method went through C1 and C2 once more in every batch. With
# this many entries a batch compiles none after the first (bench JVMs: classes per pass 19 -> 0, the
# runner's JIT time per pass 2.2-2.6 s -> 1.6 s after six passes). The cache holds only the classes of
# the shapes a job runs, so the bound costs nothing until it is needed.
CODEGEN_CACHE_ENTRIES = 1000


def job_spark_conf():
    """The settings every session that runs the job code starts with (Glue's SparkContext in glue_entry,
    local_runner.local_spark_session, the test suite's session). They are static: Spark reads them once,
    when the SparkContext is created, so a session that exists already keeps what it has."""
    from pyspark import SparkConf

    return SparkConf(loadDefaults=False).set("spark.sql.codegen.cache.maxEntries", str(CODEGEN_CACHE_ENTRIES))


@contextlib.contextmanager
def session_conf(spark, settings: dict[str, str]):
    """The SQL settings in `settings` for the duration of the block; afterwards (also after an error) each
    key is back as it was: its earlier value, or unset. Spark reads most of them when a query is planned
    (a cache defined, a micro-batch planned), so the block must cover that, not only the action."""
    conf = spark.conf
    previous = {key: conf.get(key, None) for key in settings}
    for key, value in settings.items():
        conf.set(key, value)
    try:
        yield
    finally:
        for key, value in previous.items():
            if value is None:
                conf.unset(key)
            else:
                conf.set(key, value)
