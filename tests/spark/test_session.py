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


def test_local_paths_get_the_permissions_hadoop_sets_without_starting_a_chmod_process(spark, tmp_path):
    """local_session's `file:` file system (jvm/glue-functions ForklessLocalFileSystem) sets through java.nio the modes
    Hadoop's own RawLocalFileSystem sets by running `chmod` (no native library here): compared call for call, a
    mode beyond rwx (sticky) included, which goes Hadoop's way."""
    import os
    import stat

    from glue_jobs.session import FORKLESS_LOCAL_FS, forkless_local_fs

    jvm = spark._jvm
    conf = spark._jsc.hadoopConfiguration()
    ours = jvm.org.apache.hadoop.fs.FileSystem.getLocal(conf)
    assert (ours.getClass().getName() == FORKLESS_LOCAL_FS) == forkless_local_fs()  # STREAMLAKE_LOCAL_FS=hadoop: Hadoop's
    hadoops = jvm.org.apache.hadoop.fs.LocalFileSystem()  # checksums over RawLocalFileSystem, as ours
    hadoops.initialize(jvm.java.net.URI("file:///"), conf)
    permission = jvm.org.apache.hadoop.fs.permission.FsPermission

    def modes(fs, root):
        base = jvm.org.apache.hadoop.fs.Path(str(root))
        made = jvm.org.apache.hadoop.fs.Path(base, "a/b")
        assert fs.mkdirs(made, permission(0o750))
        out = fs.create(jvm.org.apache.hadoop.fs.Path(made, "f"), permission(0o640), True, 4096, 1, 1 << 20, None)
        out.write(b"x")
        out.close()
        fs.setPermission(jvm.org.apache.hadoop.fs.Path(base, "a"), permission(0o705))
        fs.setPermission(jvm.org.apache.hadoop.fs.Path(made, "f"), permission(0o604))
        sticky = jvm.org.apache.hadoop.fs.Path(base, "sticky")
        assert fs.mkdirs(sticky)
        fs.setPermission(sticky, permission(0o1777))
        return {str(p.relative_to(root)): stat.S_IMODE(os.stat(p).st_mode) for p in sorted(root.rglob("*"))}

    found = modes(ours, tmp_path / "ours")
    assert found == modes(hadoops, tmp_path / "hadoop")
    assert found == {"a": 0o705, "a/b": 0o750, "a/b/.f.crc": 0o604, "a/b/f": 0o604, "sticky": 0o1777}


def test_the_local_file_system_choice_is_checked(monkeypatch):
    from glue_jobs.session import LOCAL_FS_VARIABLE, forkless_local_fs, local_fs_settings

    monkeypatch.delenv(LOCAL_FS_VARIABLE, raising=False)
    assert forkless_local_fs() and local_fs_settings("f.jar")["spark.driver.extraClassPath"] == "f.jar"
    assert local_fs_settings(None) == {}
    monkeypatch.setenv(LOCAL_FS_VARIABLE, "hadoop")
    assert not forkless_local_fs() and local_fs_settings("f.jar") == {}
    monkeypatch.setenv(LOCAL_FS_VARIABLE, "Hadoop")
    with pytest.raises(ValueError, match="STREAMLAKE_LOCAL_FS='Hadoop': expected one of forkless, hadoop"):
        forkless_local_fs()
