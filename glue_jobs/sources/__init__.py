"""Source adapters: each maps one source's raw micro-batch frame to the envelope (glue_jobs.contract).

Envelope: payload (text), record (decoded columns or null), source, source_partition, source_offset,
arrival_time, problem (a verdict the adapter already has, or null). The batch function sees nothing else, so a
new source is one small function here.

What Glue hands the batch function, per source (docs/streaming-job.md "Sources" cites each point):
- Kinesis, read from the catalog table (classification json) with inferSchema=true: one string column
  holding the record's text, `$json$data_infer_schema$_temporary$` (some releases spell it
  `$json$data_infer_schema$.temporary$`; both are accepted). With inferSchema=false Glue parses the JSON
  into the table's columns and the original text is gone, so dead letters could not keep it: the
  entrypoint always asks for inferSchema=true, and a frame with parsed columns is refused here.
- With addRecordTimestamp=true (set by the entrypoint): `__src_timestamp`, the time the stream received the
  record, which becomes arrival_time. Its type is not documented (unverified): a timestamp is taken as it is,
  a long as epoch milliseconds. A frame without it, or with another type, is not failed (a failed batch is
  retried and fails again: the job would stop on it): arrival_time is then the batch's processing time, and the
  anomaly is noted (see `from_kinesis`), like any column the frame has beyond these two, which is ignored.
- It gives neither the shard nor the sequence number: source_partition and source_offset are null
  (duplicates then keep the first copy in the batch's input order).
- Kafka/MSK is not read through Glue: Spark's Kafka source (from_kafka_records, docs/kafka.md) gives each
  record's bytes with partition, offset and timestamp; the frames are decoded in the JVM.
- Local files (the local runner): the text source with wholetext=true, one row per file; lines are
  split natively so each record keeps its file name and 1-based line number as partition/offset. The value holds
  the file's bytes as they are: a line that is not UTF-8 is a malformed_json dead letter whose payload is its
  bytes in base64 (NOT_UTF8), not text with U+FFFD in place of its bad bytes.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from glue_jobs.batch_constants import with_batch_constants
from glue_jobs.column_seq import ColumnSeq, select
from glue_jobs.schema import PROBLEM_DDL, source_record_type

# The record text of a Kinesis frame read with inferSchema=true, as spelled by different Glue releases.
KINESIS_TEXT_COLUMNS = ("$json$data_infer_schema$_temporary$", "$json$data_infer_schema$.temporary$")
# addRecordTimestamp=true adds this column (Kinesis and Kafka connection options, Glue 4.0 or later).
RECORD_TIMESTAMP = "__src_timestamp"


def _no_record():
    return F.lit(None).cast(source_record_type()).alias("record")


def _no_problem():
    return F.lit(None).cast(PROBLEM_DDL).alias("problem")


def _quoted(name: str):
    return F.col(f"`{name}`")


def _require(raw: DataFrame, columns, source: str) -> None:
    missing = [c for c in columns if c not in raw.columns]
    if missing:
        raise ValueError(f"{source} frame lacks column(s) {missing}; it has {raw.columns}")


def _record_timestamp(raw: DataFrame, source: str, notes: list[str] | None = None) -> str:
    """How arrival_time comes from `__src_timestamp` (see the module docstring for the types taken): "timestamp" (as it
    is), "epoch ms" (a long), or, with `notes`, "processing time" when the column is missing or of another type, with a
    note; without `notes` those are refused. `_ARRIVAL_TIMES` has the column of each."""
    if RECORD_TIMESTAMP not in raw.columns or not isinstance(raw.schema[RECORD_TIMESTAMP].dataType, (T.TimestampType, T.LongType)):
        found = (f"is {raw.schema[RECORD_TIMESTAMP].dataType.simpleString()}, not a timestamp or epoch-ms long"
                 if RECORD_TIMESTAMP in raw.columns else "is missing (read with addRecordTimestamp=true)")
        if notes is None:
            raise ValueError(f"{source} frame: {RECORD_TIMESTAMP} {found}")
        notes.append(f"{RECORD_TIMESTAMP} {found}: arrival_time is the batch's processing time")
        return "processing time"
    return "timestamp" if isinstance(raw.schema[RECORD_TIMESTAMP].dataType, T.TimestampType) else "epoch ms"


_ARRIVAL_TIMES = {
    "processing time": lambda: F.current_timestamp().alias("arrival_time"),
    "timestamp": lambda: _quoted(RECORD_TIMESTAMP).alias("arrival_time"),
    "epoch ms": lambda: F.expr(f"timestamp_millis(`{RECORD_TIMESTAMP}`)").alias("arrival_time"),
}


def spread(raw: DataFrame, min_partitions: int) -> DataFrame:
    """The batch frame over at least `min_partitions` Spark partitions (the executor cores): Glue's Kinesis reader
    gives one partition per shard, so a stream with fewer shards than cores would leave cores idle while the
    contract, the heaviest step, runs ("Best practices for AWS Glue streaming": repartition when the source has
    fewer shards than the job has cores). A frame with enough partitions is returned as it is (no shuffle)."""
    if min_partitions < 1:
        raise ValueError(f"min_partitions must be >= 1, got {min_partitions}")
    return raw.repartition(min_partitions) if raw.rdd.getNumPartitions() < min_partitions else raw


def from_kinesis(raw: DataFrame, source_name: str, notes: list[str] | None = None) -> DataFrame:
    """Glue's Kinesis frame -> the envelope. A frame without exactly one record-text column is refused: its records
    could not even become dead letters. With `notes` (the Glue job passes one per batch, logs and counts it:
    BatchStats.frame_anomalies), other columns are ignored and a missing or odd `__src_timestamp` is replaced by
    the processing time, each with a note, instead of failing the batch; without, both are refused (tests)."""
    text = [c for c in KINESIS_TEXT_COLUMNS if c in raw.columns]
    other = sorted(set(raw.columns) - set(KINESIS_TEXT_COLUMNS) - {RECORD_TIMESTAMP})
    if len(text) != 1 or (other and notes is None):
        raise ValueError(
            f"Kinesis frame must hold the record text in one of {list(KINESIS_TEXT_COLUMNS)} (read with "
            f"inferSchema=true) and {RECORD_TIMESTAMP}; it has {raw.columns}"
        )
    if other:
        notes.append(f"unexpected column(s) {other} ignored (the frame has {raw.columns})")
    from pyspark import SparkContext

    return select(raw, _kinesis_columns(SparkContext._jvm, source_name, text[0], _record_timestamp(raw, "Kinesis", notes)))


@functools.cache
def _kinesis_columns(jvm, source_name: str, text: str, arrival: str) -> ColumnSeq:
    """from_kinesis' select for one source, record-text column and arrival time (_ARRIVAL_TIMES), built once per JVM
    (as from_local_files' columns: dozens of py4j round trips a batch when built per batch)."""
    return ColumnSeq([
        _quoted(text).cast("string").alias("payload"),
        _no_record(),
        F.lit(source_name).alias("source"),
        F.lit(None).cast("string").alias("source_partition"),
        F.lit(None).cast("string").alias("source_offset"),
        _ARRIVAL_TIMES[arrival](),
        _no_problem(),
    ])


def from_local_files(raw: DataFrame, source_name: str, arrival_ms: int) -> DataFrame:
    """Text source read with wholetext=true: `value` is a whole file. Lines end with \\n or \\r\\n;
    the final terminator ends the last line (it does not start an empty one); blank lines are records.
    arrival_ms (epoch ms) is the batch's processing time: files carry no per-record arrival time (it is
    joined as data, not a literal: see glue_jobs/batch_constants.py). The columns are built once per source and JVM
    (`_local_columns`): built per batch they were about 270 py4j round trips, 120 of them reflection lookups."""
    from pyspark import SparkContext

    _require(raw, ("value",), "local text")
    columns = _local_columns(SparkContext._jvm, source_name, _utf8_kind(raw.sparkSession))
    lines = select(select(select(select(raw, columns.read), columns.split), columns.counted), columns.exploded)
    return select(with_batch_constants(lines.filter(columns.is_line), {"_arrival_ms": arrival_ms}), columns.envelope)


class _LocalColumns(NamedTuple):
    read: ColumnSeq
    split: ColumnSeq
    counted: ColumnSeq
    exploded: ColumnSeq
    is_line: Column
    envelope: ColumnSeq


@functools.cache
def _local_columns(jvm, source_name: str, utf8_kind: str) -> _LocalColumns:
    """from_local_files' selects, for one source name and UTF-8 check (`_utf8_kind`), in the JVM `jvm`."""
    # split on "\n" (no regex), then per row: drop the empty piece after a final "\n" (and the one piece
    # of an empty file), and one "\r" before each "\n". No expression runs over the whole file but the
    # split itself: substring/length of a multi-megabyte value cost more than the rest of the adapter.
    value = F.col("value")
    piece, position = F.col("_piece"), F.col("_pos")
    is_utf8 = _UTF8_CHECKS[utf8_kind]
    followed_by_newline = position < F.col("_n") - 1
    is_line = followed_by_newline | ~(F.col("_ends_with_newline") | F.col("_empty"))
    # A file that is not UTF-8 (checked whole, once: `_utf8`) is split as ISO-8859-1 text, one character per byte, so
    # each line's bytes come back exact (encoding it as ISO-8859-1 again); split as UTF-8 text, Spark's split (a Java
    # String) would have put U+FFFD in place of its bad bytes. Its valid lines are those bytes read as UTF-8.
    utf8, line = F.col("_utf8"), F.when(followed_by_newline & piece.endswith("\r"), piece.substr(F.lit(1), F.length(piece) - 1)).otherwise(piece)
    line_bytes = F.encode(line, "ISO-8859-1")
    bad_line = F.when(utf8, F.lit(False)).otherwise(~is_utf8(line_bytes))
    return _LocalColumns(
        read=ColumnSeq([value, is_utf8(value.cast("binary")).alias("_utf8")]),
        split=ColumnSeq([
            # Whole-stage codegen evaluates this where it is used, after the explode: once per line, not per file.
            # A regex here cost 10% of the validation's CPU (1M lines); substring_index scans back to the last "/".
            F.substring_index(F.input_file_name(), "/", -1).alias("_file"),
            value.endswith("\n").alias("_ends_with_newline"),
            (value == "").alias("_empty"),
            F.split(F.when(utf8, value).otherwise(F.decode(value.cast("binary"), "ISO-8859-1")), "\n").alias("_pieces"),
            utf8,
        ]),
        counted=ColumnSeq([F.col("*"), F.size("_pieces").alias("_n")]),
        # _n is computed before the generator: computed after it, every exploded row would carry the array.
        exploded=ColumnSeq([F.col(name) for name in ("_file", "_ends_with_newline", "_empty", "_n", "_utf8")]
                           + [F.posexplode("_pieces").alias("_pos", "_piece")]),
        is_line=is_line,
        envelope=ColumnSeq([
            F.when(utf8, line).when(bad_line, F.base64(line_bytes)).otherwise(line_bytes.cast("string")).alias("payload"),
            _no_record(),
            F.lit(source_name).alias("source"),
            F.col("_file").alias("source_partition"),
            (position + 1).cast("string").alias("source_offset"),
            F.expr("timestamp_millis(_arrival_ms)").alias("arrival_time"),
            F.when(bad_line, F.struct(F.lit("malformed_json").alias("reason"), F.lit(NOT_UTF8).alias("detail"))).cast(PROBLEM_DDL)
            .alias("problem"),
        ]),
    )


# A local line whose bytes are not UTF-8: JSON text is UTF-8 (RFC 8259 section 8.1), and the text source would hand the
# contract U+FFFD in place of each bad byte, a value the producer never sent. Its dead letter keeps the bytes instead.
NOT_UTF8 = "payload: the line is not valid UTF-8; the dead letter's payload is the line's bytes in base64"


VALID_UTF8_CLASS = "com.streamlake.glue.ValidUtf8"  # jvm/glue-functions


def _utf8_check(session):
    """A function of a binary column: whether its bytes are valid UTF-8. Spark 4 has is_valid_utf8 ("New in version
    4.0.0", pyspark.sql.functions reference). Before it: the functions jar's ValidUtf8 where it is on the classpath (one
    pass over the bytes), registered on `session` (a streaming query plans each batch in a clone of the job's session,
    with its own function registry: glue_jobs/contract/strict_json.py); else decoding the bytes, which replaces each malformed
    sequence with U+FFFD (StringDecode: `new String(bytes, charset)`), and encoding them again gives other bytes exactly
    when they were not UTF-8. Spark 4's decode raises on malformed input instead (SPARK-48658), so that round trip is
    Spark 3's only."""
    return _UTF8_CHECKS[_utf8_kind(session)]


_UTF8_CHECKS = {
    "builtin": lambda data: F.call_function("is_valid_utf8", data.cast("string")),  # the cast keeps the bytes as they are
    "jar": lambda data: F.call_udf(VALID_UTF8_FUNCTION, data),
    "round trip": lambda data: F.encode(F.decode(data, "UTF-8"), "UTF-8") == data,
}
VALID_UTF8_FUNCTION = "streamlake_valid_utf8"


def _utf8_kind(session) -> str:
    """Which of _UTF8_CHECKS `session` has: "jar" registers the jar's function on it (each session has its own
    registry), with the classes looked up once per JVM (`_utf8_classes`)."""
    if int(session.version.split(".")[0]) >= 4:
        return "builtin"
    found = _utf8_classes(session.sparkContext._jvm) if hasattr(F, "call_udf") else None  # call_udf: pyspark 3.4+
    if found is None:
        return "round trip"
    function, boolean = found
    session._jsparkSession.udf().register(VALID_UTF8_FUNCTION, function(), boolean)
    return "jar"


@functools.cache
def _utf8_classes(jvm):
    """(the jar's ValidUtf8 class, Spark's BooleanType), or None without the jar: py4j resolves a dotted name with one
    reflection round trip per part on every access."""
    found = jvm
    for part in VALID_UTF8_CLASS.split("."):
        found = getattr(found, part)
    if type(found).__name__ != "JavaClass":
        return None
    return found, jvm.org.apache.spark.sql.types.DataTypes.BooleanType


# Spark's Kafka source (spark-sql-kafka-0-10; structured-streaming-kafka-integration, "Creating a Kafka Source"):
# key and value (binary), topic, partition (int), offset (long), timestamp, timestampType (int).
KAFKA_COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp", "timestampType")


def from_kafka_records(raw: DataFrame, source_name: str, decoding) -> DataFrame:
    """Kafka records (value framed by the Schema Registry serializer) -> the envelope. `decoding` is the source's
    glue_jobs.decoding.registry_frames.FrameDecoding. A decoded record's payload is its JSON rendering (the contract
    validates it like a JSON record); an undecodable one keeps its bytes as base64 and gets its `problem`.
    source_partition is the Kafka partition number, source_offset the offset, arrival_time the record's
    timestamp (the broker's append time when the topic sets message.timestamp.type=LogAppendTime, the
    producer's create time otherwise)."""
    _require(raw, KAFKA_COLUMNS, "Kafka (Spark's Kafka source)")
    decoded = F.col("_decoded")
    failed = decoded.getField("reason").isNotNull()
    # The undecodable value's base64 comes from the decoder: Spark 3's base64() breaks lines every 76 characters.
    # With typed records the envelope's record is the decoded record in the typed contract's plain-parse shape
    # (registry_frames.record_type): the contract then skips parsing the payload, which still holds its JSON.
    record = decoded.getField("record").alias("record") if decoding.typed_records else _no_record()
    return raw.select(
        decoding.column("value").alias("_decoded"), "partition", "offset", "timestamp",
    ).select(
        decoded.getField("payload").alias("payload"),
        record,
        F.lit(source_name).alias("source"),
        F.col("partition").cast("string").alias("source_partition"),
        F.col("offset").cast("string").alias("source_offset"),
        F.col("timestamp").alias("arrival_time"),
        F.when(failed, F.struct(decoded.getField("reason").alias("reason"), decoded.getField("detail").alias("detail")))
        .cast(PROBLEM_DDL).alias("problem"),
    )
