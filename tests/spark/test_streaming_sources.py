"""Source adapters against frames of each source's exact schema, and the Glue entrypoint's contract."""

from __future__ import annotations

import importlib.util
import json

import pytest
from pyspark.sql import functions as F
from pyspark.sql import types as T

from glue_jobs import datasets, glue_entry
from glue_jobs.schema import envelope_schema
from glue_jobs.sources import RECORD_TIMESTAMP, from_kinesis, from_local_files

# What Glue hands the batch function (docs/streaming-job.md "Sources"): Kinesis read from the catalog table
# with inferSchema=true, one string column with the record text, plus __src_timestamp (addRecordTimestamp).
KINESIS_TEXT = "$json$data_infer_schema$_temporary$"
KINESIS_SCHEMA = T.StructType([
    T.StructField(KINESIS_TEXT, T.StringType()),
    T.StructField("__src_timestamp", T.TimestampType()),
])
PAYLOAD = '{"event_id":"e1","event_type":"click","event_time":1700000000000,"note":"café"}'


def _envelope_types(frame):
    return [(f.name, f.dataType) for f in frame.schema.fields]


EXPECTED_TYPES = [(f.name, f.dataType) for f in envelope_schema().fields]


def _kinesis_frame(spark, column: str = KINESIS_TEXT, timestamp=None):
    timestamp = F.expr("timestamp_millis(1700000000500)") if timestamp is None else timestamp
    return spark.range(1).select(F.lit(PAYLOAD).alias(column), timestamp.alias("__src_timestamp"))


@pytest.mark.parametrize("column", [KINESIS_TEXT, "$json$data_infer_schema$.temporary$"])
def test_kinesis_adapter_keeps_the_record_text_glue_delivers(spark, column):
    raw = _kinesis_frame(spark, column)
    if column == KINESIS_TEXT:
        assert [(f.name, f.dataType) for f in raw.schema.fields] == [(f.name, f.dataType) for f in KINESIS_SCHEMA.fields]
    envelope = from_kinesis(raw, "clickstream")
    assert _envelope_types(envelope) == EXPECTED_TYPES
    row = envelope.select("payload", "record", "source", "source_partition", "source_offset",
                          F.expr("unix_millis(arrival_time)").alias("arrival_ms")).first()
    # Glue gives neither shard nor sequence number: lineage it cannot give is null.
    assert row.asDict() == {"payload": PAYLOAD, "record": None, "source": "clickstream", "source_partition": None,
                            "source_offset": None, "arrival_ms": 1700000000500}


def test_kinesis_adapter_reads_an_epoch_millisecond_record_timestamp(spark):
    raw = _kinesis_frame(spark, timestamp=F.lit(1700000000500))
    row = from_kinesis(raw, "clickstream").select(F.expr("unix_millis(arrival_time)").alias("ms")).first()
    assert row.ms == 1700000000500


def test_the_jobs_kinesis_adapter_notes_unexpected_columns_and_timestamps_instead_of_failing_the_batch(spark):
    """As the Glue job calls it (with notes): a failed batch is retried and fails again, so the job would stop on a
    frame anomaly; it is worked around, logged and counted (BatchStats.frame_anomalies -> FrameAnomalies)."""
    extra = _kinesis_frame(spark).withColumn("approximateArrivalTimestamp", F.lit(1))
    notes: list[str] = []
    (row,) = from_kinesis(extra, "clickstream", notes).collect()
    assert row.payload == PAYLOAD and notes == [
        f"unexpected column(s) ['approximateArrivalTimestamp'] ignored (the frame has {extra.columns})"]
    for frame, found in ((_kinesis_frame(spark, timestamp=F.lit("2023-11-14")), "is string, not a timestamp or epoch-ms long"),
                         (spark.range(1).select(F.lit(PAYLOAD).alias(KINESIS_TEXT)), "is missing (read with addRecordTimestamp=true)")):
        notes = []
        before = spark.sql("SELECT current_timestamp() AS t").first().t
        (row,) = from_kinesis(frame, "clickstream", notes).collect()
        assert notes == [f"__src_timestamp {found}: arrival_time is the batch's processing time"]
        assert row.payload == PAYLOAD and row.arrival_time >= before
    with pytest.raises(ValueError, match="inferSchema=true"):  # no record text: nothing could even be dead-lettered
        from_kinesis(spark.range(1).select(F.lit(b"x").alias("data")), "clickstream", [])


def test_a_batch_from_fewer_shards_than_cores_is_spread_over_the_cores_and_keeps_every_record(spark):
    from glue_jobs.sources import spread

    one_shard = spark.range(100).coalesce(1).select(F.col("id").cast("string").alias(KINESIS_TEXT))
    spread_out = spread(one_shard, 6)
    assert spread_out.rdd.getNumPartitions() == 6
    assert sorted(r[0] for r in spread_out.collect()) == sorted(r[0] for r in one_shard.collect())
    many = spark.range(100).repartition(8)
    assert spread(many, 6) is many  # enough partitions already: no shuffle
    with pytest.raises(ValueError, match="min_partitions must be >= 1"):
        spread(many, 0)


def test_kinesis_adapter_refuses_frames_glue_gives_without_the_record_text(spark):
    # inferSchema=false: Glue parses the JSON into the catalog columns and the original text is gone.
    parsed = spark.range(1).select(F.lit("e1").alias("event_id"), F.lit(1).alias("event_time"),
                                   F.current_timestamp().alias("__src_timestamp"))
    with pytest.raises(ValueError, match="inferSchema=true"):
        from_kinesis(parsed, "clickstream")
    # The connector columns an earlier version of this job expected: Glue never delivers them.
    with pytest.raises(ValueError, match="inferSchema=true"):
        from_kinesis(spark.range(1).select(F.lit(b"x").alias("data"), F.lit("p").alias("partitionKey")), "clickstream")
    with pytest.raises(ValueError, match="addRecordTimestamp"):
        from_kinesis(spark.range(1).select(F.lit(PAYLOAD).alias(KINESIS_TEXT)), "clickstream")
    with pytest.raises(ValueError, match="not a timestamp or epoch-ms long"):
        from_kinesis(_kinesis_frame(spark, timestamp=F.lit("2023-11-14")), "clickstream")


def test_local_file_adapter_numbers_lines_per_file(spark, tmp_path):
    (tmp_path / "a.json").write_text('{"x":1}\n\n{"y":2}\r\nlast-without-newline', encoding="utf-8")
    (tmp_path / "b.json").write_text("", encoding="utf-8")
    (tmp_path / "c.json").write_text("only\n", encoding="utf-8")
    (tmp_path / "d.json").write_bytes("\n\r\n cr-kept\r\n\u2028\r".encode("utf-8"))
    raw = spark.read.format("text").option("wholetext", "true").load(str(tmp_path))
    envelope = from_local_files(raw, "local", 1700000000000)
    assert _envelope_types(envelope) == EXPECTED_TYPES
    rows = envelope.select("payload", "source_partition", "source_offset",
                           F.expr("unix_millis(arrival_time)").alias("ms")).collect()
    assert sorted(tuple(r) for r in rows) == sorted([
        ('{"x":1}', "a.json", "1", 1700000000000),
        ("", "a.json", "2", 1700000000000),
        ('{"y":2}', "a.json", "3", 1700000000000),
        ("last-without-newline", "a.json", "4", 1700000000000),
        ("only", "c.json", "1", 1700000000000),
        # blank lines are records; only a "\r" right before a "\n" is part of the terminator
        ("", "d.json", "1", 1700000000000),
        ("", "d.json", "2", 1700000000000),
        (" cr-kept", "d.json", "3", 1700000000000),
        ("\u2028\r", "d.json", "4", 1700000000000),
    ])


def test_a_local_line_that_is_not_utf8_is_a_dead_letter_with_its_bytes(spark, tmp_path):
    """The text source hands over a file's bytes undecoded: a line with a byte sequence that is not UTF-8 is a
    malformed_json dead letter whose payload is the line's bytes in base64 (recoverable exactly), and the file's other
    lines, a valid U+FFFD among them (a producer may send one), are records as sent. Before, the line reached the
    contract with U+FFFD in place of the bytes and, being JSON, was stored (row 3 of issue 57's table)."""
    import base64

    bad = [b'{"customer_id":"cu\xc3(\xff\xfe"}', b"\x80", b'{"a":"\xed\xa0\x80"}', b"\xf5\x80\x80\x80"]  # a lone surrogate, > U+10FFFF
    good = ['{"customer_id":"cu\u00e9"}', '{"note":"\ufffd sent as such"}']
    (tmp_path / "mixed.json").write_bytes(b"\n".join([good[0].encode(), *bad, good[1].encode()]) + b"\n")
    (tmp_path / "clean.json").write_bytes(good[1].encode() + b"\n")
    raw = spark.read.format("text").option("wholetext", "true").load(str(tmp_path))
    rows = from_local_files(raw, "local", 1700000000000).select("payload", "problem", "source_partition", "source_offset").collect()
    by_line = {(r.source_partition, r.source_offset): r for r in rows}
    assert len(by_line) == 7
    for n, line in enumerate(bad, start=2):
        row = by_line[("mixed.json", str(n))]
        assert (row.problem.reason, base64.b64decode(row.payload)) == ("malformed_json", line)
        assert "not valid UTF-8" in row.problem.detail
    for key, text in ((("mixed.json", "1"), good[0]), (("mixed.json", "6"), good[1]), (("clean.json", "1"), good[1])):
        assert (by_line[key].payload, by_line[key].problem) == (text, None)


def test_the_utf8_check_agrees_with_a_strict_decoder_on_tricky_and_random_bytes(spark):
    """The check from_local_files uses on this Spark line (is_valid_utf8 on Spark 4; the jar's ValidUtf8 on 3.4+ with the
    jar; the decode/encode round trip otherwise) against Python's strict UTF-8 decoder (RFC 3629: no overlongs,
    surrogates or code points above U+10FFFF)."""
    import random

    from glue_jobs.sources import _utf8_check

    rng = random.Random(7)
    tricky = [b"", b"ok", "\u00e9\u2713\U0001F600".encode(), b"\xc0\x80", b"\xc1\xbf", b"\xe0\x80\x80", b"\xe0\xa0\x80",
              b"\xed\x9f\xbf", b"\xed\xa0\x80", b"\xf0\x8f\xbf\xbf", b"\xf0\x90\x80\x80", b"\xf4\x8f\xbf\xbf", b"\xf4\x90\x80\x80",
              b"\xf5\x80\x80\x80", b"\xe2\x82", b"a\xe2\x82", b"\x80", b"\xff", "\ufffd".encode()]
    samples = tricky + [bytes(rng.choice([rng.randrange(256), rng.randrange(0x80, 0xC0), 0xE2, 0xF0, 0x41])
                              for _ in range(rng.randrange(1, 9))) for _ in range(400)]

    def strict(data: bytes) -> bool:
        try:
            data.decode("utf-8")
            return True
        except UnicodeDecodeError:
            return False

    # Literals, not createDataFrame: Spark 3.3's pyspark cannot pickle on Python 3.11.
    frame = spark.range(1).select(F.posexplode(F.array(*[F.unhex(F.lit(b.hex())) for b in samples])).alias("i", "b"))
    checked = [r[1] for r in sorted(frame.select("i", _utf8_check(spark)(F.col("b"))).collect())]
    assert checked == [strict(b) for b in samples]


def test_entrypoint_argument_contract():
    assert glue_entry.job_arguments() == glue_entry.JOB_ARGUMENTS
    assert glue_entry.source_keys("kinesis") == glue_entry.SOURCE_KEYS + ("max_fetch_records_per_shard", "max_fetch_time_ms",
                                                                         "source_table", "min_partitions")
    assert glue_entry.source_keys("kafka")[len(glue_entry.SOURCE_KEYS):] == (
        "max_offsets_per_trigger", "bootstrap_servers", "topic", "registry_name", "schema_name", "kafka_auth",
        "partitions", "min_partitions")
    assert glue_entry.source_keys("kinesis", "iceberg")[-2:] == ("lake_table", "lake_table_location")
    assert "JOB_NAME" in glue_entry.JOB_ARGUMENTS and glue_entry.GLUE_SUPPLIED_ARGUMENTS == ("JOB_NAME",)
    with pytest.raises(ValueError, match="source_type"):
        glue_entry.source_keys("pubsub")


KINESIS = {"max_fetch_records_per_shard": "100000", "max_fetch_time_ms": "2000", "source_table": "src", "min_partitions": "36"}
KAFKA = {"starting_position": "earliest", "max_offsets_per_trigger": "1000000", "bootstrap_servers": "b-1.msk:9098,b-2.msk:9098",
         "topic": "orders-events", "registry_name": "streamlake-dev", "schema_name": "com.streamlake.orders.Order",
         "kafka_auth": "iam", "partitions": "all", "min_partitions": "none"}


def _source(source_type: str, extra: dict[str, str], name: str = "clicks") -> dict[str, str]:
    return {"source_name": name, "source_type": source_type, "lake_path": "s3://l/events",
            "dead_letter_path": f"s3://d/dead_letters/{name}", "checkpoint_path": f"s3://t/checkpoints/{name}/",
            "starting_position": "TRIM_HORIZON", "dataset": "clickstream",
            "dataset_digest": datasets.load("clickstream").digest, **extra}


def _argv(*sources: dict[str, str]) -> list[str]:
    values = {"JOB_NAME": "job", "environment": "dev", "catalog_database": "db", "window_size_seconds": "60",
              "batch_max_retries": "3", "metrics_namespace": "StreamLake", "metrics_region": "eu-west-1",
              "sources": json.dumps(list(sources))}
    return ["script.py", *(x for k, v in values.items() for x in (f"--{k}", v)), "--enable-auto-scaling", "true"]


def _sources(*sources: dict[str, str]) -> list[dict[str, str]]:
    return glue_entry.job_sources(glue_entry.resolve_arguments(_argv(*sources)))


@pytest.mark.skipif(importlib.util.find_spec("awsglue") is None, reason="AWSGlueDataplanePython is not installed here")
def test_entrypoint_resolves_its_arguments_and_builds_glue_options():
    (args,) = _sources(_source("kinesis", KINESIS))
    assert (args["environment"], args["source_name"], args["lake_path"]) == ("dev", "clicks", "s3://l/events")
    assert glue_entry.source_options(args) == {"addRecordTimestamp": "true", "emitConsumerLagMetrics": "true",
                                               "inferSchema": "true", "startingPosition": "TRIM_HORIZON",
                                               "maxFetchRecordsPerShard": "100000", "maxFetchTimeInMs": "2000"}
    assert glue_entry.for_each_batch_options(args) == {"windowSize": "60 seconds",
                                                       "checkpointLocation": "s3://t/checkpoints/clicks/",
                                                       "batchMaxRetries": "3", "persistDataFrame": "false"}
    (kafka,) = _sources(_source("kafka", KAFKA))
    assert glue_entry.kafka_reader_options(kafka) == {
        "kafka.bootstrap.servers": "b-1.msk:9098,b-2.msk:9098", "subscribe": "orders-events", "startingOffsets": "earliest",
        "maxOffsetsPerTrigger": "1000000", "failOnDataLoss": "true", "includeHeaders": "false",
        "kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "AWS_MSK_IAM",
        "kafka.sasl.jaas.config": "software.amazon.msk.auth.iam.IAMLoginModule required;",
        "kafka.sasl.client.callback.handler.class": "software.amazon.msk.auth.iam.IAMClientCallbackHandler"}
    with pytest.raises(ValueError, match="for Kinesis sources"):
        glue_entry.source_options(kafka)
    local = glue_entry.kafka_reader_options({**kafka, "kafka_auth": "none"})
    assert "kafka.sasl.mechanism" not in local and "kafka.security.protocol" not in local
    group = glue_entry.kafka_reader_options({**kafka, "partitions": "3,1,2", "min_partitions": "24"})
    assert (group["assign"], group["minPartitions"]) == ('{"orders-events":[1,2,3]}', "24") and "subscribe" not in group
    with pytest.raises(ValueError, match="partitions '1;2' is not 'all' or a comma-separated list"):
        glue_entry.kafka_reader_options({**kafka, "partitions": "1;2"})
    with pytest.raises(ValueError, match="kafka_auth 'IAM' is not 'iam' or 'none'"):
        glue_entry.kafka_reader_options({**kafka, "kafka_auth": "IAM"})
    with pytest.raises(Exception, match="sources"):
        glue_entry.resolve_arguments(_argv()[:-4])  # no --sources at all


@pytest.mark.skipif(importlib.util.find_spec("awsglue") is None, reason="AWSGlueDataplanePython is not installed here")
def test_a_job_runs_several_sources_each_with_its_own_keys_and_refuses_what_would_collide():
    both = _sources(_source("kinesis", KINESIS), _source("kafka", KAFKA, name="orders"))
    assert [(s["source_name"], s["source_type"], s["window_size_seconds"]) for s in both] == [
        ("clicks", "kinesis", "60"), ("orders", "kafka", "60")]
    kinesis = _source("kinesis", KINESIS)
    refused = {
        r"--sources\[1\] \(clicks\): source_name 'clicks' is also --sources\[0\]'s": [kinesis, kinesis],
        r"--sources\[1\] \(other\): checkpoint_path 's3://t/checkpoints/clicks/' is also --sources\[0\]'s":
            [kinesis, {**kinesis, "source_name": "other", "dead_letter_path": "s3://d/x"}],
        r"--sources\[0\] \(clicks\): missing key\(s\) \['topic'\]": [
            {k: v for k, v in _source("kafka", KAFKA).items() if k != "topic"}],
        r"--sources\[0\] \(clicks\): unknown key\(s\) \['topic'\]": [{**kinesis, "topic": "t"}],
        r"--sources\[0\] \(clicks\): missing key\(s\) \['lake_table_location'\]": [{**kinesis, "lake_table": "t"}],
        r"--sources\[0\] \(clicks\): value\(s\) of \['min_partitions'\] must be strings": [{**kinesis, "min_partitions": 36}],
        r"--sources\[0\] \(clicks\): source_type 'pubsub'": [{**kinesis, "source_type": "pubsub"}],
        r"at least one object": [],
    }
    for message, sources in refused.items():
        with pytest.raises(ValueError, match=message):
            _sources(*sources)
    with pytest.raises(ValueError, match="--sources is not JSON"):
        glue_entry.job_sources({"sources": "[{"})


@pytest.mark.skipif(importlib.util.find_spec("awsglue") is None, reason="AWSGlueDataplanePython is not installed here")
def test_the_job_takes_its_table_format_from_its_arguments_not_from_the_zips_dataset_json():
    """An environment may override a dataset's table format (config `table_formats`): the zip's dataset.json says
    parquet for orders, the source given lake_table commits to Iceberg, and one given none writes Parquet."""
    assert datasets.load("orders").table_format == "parquet"
    kinesis = {**KINESIS, "dataset": "orders", "dataset_digest": datasets.load("orders").digest}
    (parquet,) = _sources(_source("kinesis", kinesis))
    assert glue_entry.iceberg_target(parquet) is None
    (iceberg,) = _sources(_source("kinesis", {**kinesis, "lake_table": "orders", "lake_table_location": "s3://l/orders/iceberg"}))
    target = glue_entry.iceberg_target(iceberg)
    assert (target.name, target.location) == ("glue_catalog.db.orders", "s3://l/orders/iceberg")


def test_entrypoint_refuses_dataset_files_other_than_the_synthesized_ones():
    """--dataset_digest is the digest of the dataset files the stack was synthesized with; a zip holding other
    files (a stale package, a hand-edited dataset.json) is refused before a record is read."""
    args = {"dataset": "clickstream", "dataset_digest": datasets.load("clickstream").digest}
    assert glue_entry.dataset_table(args).name == "clickstream"
    with pytest.raises(ValueError, match="dataset clickstream: the job zip's files have digest .* the job arguments 0000"):
        glue_entry.dataset_table({**args, "dataset_digest": "0000"})


@pytest.mark.skipif(importlib.util.find_spec("awsglue") is None, reason="AWSGlueDataplanePython is not installed here")
def test_entrypoint_starts_the_glue_spark_context_with_the_job_static_settings(monkeypatch):
    """Static settings count only if they are there when the SparkContext is created: the entrypoint hands
    them to the one call that creates it in Glue (the run stops there, before any Glue JVM class is needed)."""
    from pyspark import SparkContext

    from glue_jobs import session
    from glue_jobs.sources.source_queries import FAIR_SCHEDULING

    class ContextRequested(Exception):
        pass

    requested = []

    def get_or_create(conf=None):
        requested.append(dict(conf.getAll()) if conf is not None else None)
        raise ContextRequested

    monkeypatch.setattr(SparkContext, "getOrCreate", get_or_create)
    with pytest.raises(ContextRequested):
        glue_entry.main(_argv(_source("kinesis", KINESIS)))
    assert requested == [{"spark.sql.codegen.cache.maxEntries": str(session.CODEGEN_CACHE_ENTRIES), **session.CALENDAR_SETTINGS,
                          **FAIR_SCHEDULING}]


def _py4j_commands(spark, action) -> dict[str, int]:
    """The py4j commands `action()` sends to the JVM, by kind ("c" a call, "r" a reflection lookup, "i" a constructor...;
    py4j/protocol.py), object releases ("m") left out: pyspark's pinned-thread mode talks through py4j.clientserver."""
    import collections
    import gc

    import py4j.clientserver

    if not isinstance(spark.sparkContext._gateway, py4j.clientserver.ClientServer):
        pytest.skip("py4j's ClientServer is not this session's gateway (PYSPARK_PIN_THREAD=false)")
    sent: collections.Counter = collections.Counter()
    original = py4j.clientserver.ClientServerConnection.send_command

    def counted(self, command):
        sent[command.split("\n", 1)[0]] += 1
        return original(self, command)

    gc.collect()  # the proxies of earlier work released now, not while `action` runs
    py4j.clientserver.ClientServerConnection.send_command = counted
    try:
        action()
    finally:
        py4j.clientserver.ClientServerConnection.send_command = original
    sent.pop("m", None)  # object releases: Python's garbage collector frees proxies whenever it runs, not `action`'s work
    return dict(sent)


def test_the_local_adapter_builds_a_sources_columns_once(spark, tmp_path):
    """from_local_files' columns are built once per source name (glue_jobs/sources._local_columns): a source's next batch
    plans its selects in a few py4j round trips, not the ~270 (about 120 of them reflection lookups) of building them;
    another source's name builds its own. Counted, not timed: each round trip is a fixed cost of every micro-batch."""
    (tmp_path / "a.json").write_text('{"x":1}\n', encoding="utf-8")
    raw = spark.read.format("text").option("wholetext", "true").load(str(tmp_path))
    name = f"once-{tmp_path.name}"  # a name no other test used: its first batch builds
    first = _py4j_commands(spark, lambda: from_local_files(raw, name, 1700000000000))
    again = _py4j_commands(spark, lambda: from_local_files(raw, name, 1700000000001))
    other = _py4j_commands(spark, lambda: from_local_files(raw, f"{name}-other", 1700000000002))
    assert sum(first.values()) > 100 and sum(other.values()) > 100, (first, other)
    assert sum(again.values()) <= 30 and again.get("r", 0) <= 4, again
    rows = from_local_files(raw, name, 1700000000003).select("payload", "source", F.expr("unix_millis(arrival_time)")).collect()
    assert [tuple(r) for r in rows] == [('{"x":1}', name, 1700000000003)]


def test_the_kinesis_adapter_builds_a_sources_columns_once(spark):
    """from_kinesis' select is built once per source, text column and arrival time (glue_jobs/sources._kinesis_columns);
    a frame whose timestamp is missing gets the processing time and its note on every batch, cached or not."""
    frame, name = _kinesis_frame(spark), f"kinesis-once-{id(spark)}"
    first = _py4j_commands(spark, lambda: from_kinesis(frame, name))
    again = _py4j_commands(spark, lambda: from_kinesis(frame, name))
    assert sum(first.values()) > 30 and sum(again.values()) <= 12 and again.get("r", 0) <= 2, (first, again)
    bare = spark.range(1).select(F.lit(PAYLOAD).alias(KINESIS_TEXT))
    for _ in range(2):
        notes: list[str] = []
        row = from_kinesis(bare, name, notes).select("payload", "source", "arrival_time").first()
        assert (row.payload, row.source, row.arrival_time is not None) == (PAYLOAD, name, True)
        assert notes == [f"{RECORD_TIMESTAMP} is missing (read with addRecordTimestamp=true): arrival_time is the batch's processing time"]
