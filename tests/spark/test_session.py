"""glue_jobs.session.session_conf: settings for one block, each key back as it was afterwards."""

from __future__ import annotations

import pytest

from glue_jobs.session import session_conf

SET_KEY = "spark.sql.files.maxPartitionBytes"  # registered, with a default
UNSET_KEY = "spark.streamlake.test.unset"  # unknown to Spark: no default


def test_settings_hold_inside_and_are_restored_or_unset_after_an_error(spark):
    spark.conf.set(SET_KEY, "2048")
    try:
        with pytest.raises(RuntimeError, match="inside"):
            with session_conf(spark, {SET_KEY: "1024", UNSET_KEY: "x"}):
                assert (spark.conf.get(SET_KEY), spark.conf.get(UNSET_KEY)) == ("1024", "x")
                raise RuntimeError("inside")
        assert spark.conf.get(SET_KEY) == "2048"
        assert spark.conf.get(UNSET_KEY, None) is None  # unset again, not set to an empty value
    finally:
        spark.conf.unset(SET_KEY)


def test_the_lines_kafka_source_and_avro_functions_are_on_the_local_sessions_classpath(spark):
    """make bootstrap fetched this Spark line's connectors (jvm/jars.lock); local_session loads them, so the Kafka
    path runs locally on every line with Spark's own source and Avro functions, not stand-ins."""
    import pyspark
    from pyspark.sql.avro.functions import from_avro, to_avro

    from glue_jobs.session import connector_jars

    line = ".".join(pyspark.__version__.split(".")[:2])
    jars = connector_jars()
    assert any(f"/spark-{line}/spark-sql-kafka-0-10_" in jar for jar in jars), jars
    assert any(f"/spark-{line}/spark-avro_" in jar for jar in jars), jars
    round_trip = spark.range(3).select(to_avro("id").alias("a")).select(from_avro("a", '"long"').alias("v"))
    assert [r["v"] for r in round_trip.collect()] == [0, 1, 2]
    kafka = spark.read.format("kafka").option("kafka.bootstrap.servers", "127.0.0.1:9").option("subscribe", "t").load()
    assert kafka.columns == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
