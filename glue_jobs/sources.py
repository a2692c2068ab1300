"""Source adapters: each maps one source's raw micro-batch frame to the envelope (glue_jobs.contract).

Envelope: payload (text), record (decoded columns or null), source, source_partition, source_offset,
arrival_time. The batch function sees nothing else, so a new source is one small function here.

Assumptions per source (docs/streaming-job.md "Sources"):
- Kinesis (Glue Kinesis connector, no parsing classification): `data` (binary, or string), `streamName`,
  `partitionKey`, `sequenceNumber`, `approximateArrivalTimestamp`. The connector exposes no shard id;
  the partition key (which selects the shard) is the partition, the sequence number the offset.
- Kafka/MSK through the Schema-Registry catalog table: Glue decodes Avro into the table's columns
  (the contract fields). Spark's Kafka metadata columns `partition`, `offset`, `timestamp` (or Glue's
  `__src_timestamp` from addRecordTimestamp) are used when present, null otherwise. The dead-letter
  payload of an Avro record is its JSON rendering, to_json of the decoded record.
- Local files (the local runner): the text source with wholetext=true, one row per file; lines are
  split natively so each record keeps its file name and 1-based line number as partition/offset.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from glue_jobs.contract import with_batch_constants
from glue_jobs.schema import contract_fields, spark_source_schema

KINESIS_COLUMNS = ("data", "streamName", "partitionKey", "sequenceNumber", "approximateArrivalTimestamp")
KAFKA_METADATA_COLUMNS = ("partition", "offset", "timestamp", "__src_timestamp")


def _no_record():
    return F.lit(None).cast(spark_source_schema()).alias("record")


def _require(raw: DataFrame, columns, source: str) -> None:
    missing = [c for c in columns if c not in raw.columns]
    if missing:
        raise ValueError(f"{source} frame lacks column(s) {missing}; it has {raw.columns}")


def from_kinesis(raw: DataFrame, source_name: str) -> DataFrame:
    _require(raw, KINESIS_COLUMNS, "Kinesis")
    return raw.select(
        F.col("data").cast("string").alias("payload"),  # UTF-8 decode of the record bytes
        _no_record(),
        F.lit(source_name).alias("source"),
        F.col("partitionKey").alias("source_partition"),
        F.col("sequenceNumber").alias("source_offset"),
        F.col("approximateArrivalTimestamp").cast("timestamp").alias("arrival_time"),
    )


def from_kafka_avro(raw: DataFrame, source_name: str) -> DataFrame:
    names = [f.name for f in contract_fields()]
    _require(raw, names, "Kafka (decoded Avro)")
    record = F.struct(*(F.col(f"`{f.name}`").cast(f.spark_type).alias(f.name) for f in contract_fields()))

    def optional(name: str):
        return F.col(f"`{name}`") if name in raw.columns else F.lit(None)

    return raw.select(
        F.to_json(record).alias("payload"),
        record.cast(spark_source_schema()).alias("record"),
        F.lit(source_name).alias("source"),
        optional("partition").cast("string").alias("source_partition"),
        optional("offset").cast("string").alias("source_offset"),
        F.coalesce(optional("timestamp").cast("timestamp"), optional("__src_timestamp").cast("timestamp")).alias(
            "arrival_time"
        ),
    )


def from_local_files(raw: DataFrame, source_name: str, arrival_ms: int) -> DataFrame:
    """Text source read with wholetext=true: `value` is a whole file. Lines end with \\n or \\r\\n;
    the final terminator ends the last line (it does not start an empty one); blank lines are records.
    arrival_ms (epoch ms) is the batch's processing time: files carry no per-record arrival time (it is
    joined as data, not a literal: see contract.with_batch_constants)."""
    _require(raw, ("value",), "local text")
    # split on "\n" (no regex), then per row: drop the empty piece after a final "\n" (and the one piece
    # of an empty file), and one "\r" before each "\n". No expression runs over the whole file but the
    # split itself: substring/length of a multi-megabyte value cost more than the rest of the adapter.
    value = F.col("value")
    piece, position = F.col("_piece"), F.col("_pos")
    followed_by_newline = position < F.col("_n") - 1
    is_line = followed_by_newline | ~(F.col("_ends_with_newline") | F.col("_empty"))
    return raw.select(
        # Whole-stage codegen evaluates this where it is used, after the explode: once per line, not per file.
        # A regex here cost 10% of the validation's CPU (1M lines); substring_index scans back to the last "/".
        F.substring_index(F.input_file_name(), "/", -1).alias("_file"),
        value.endswith("\n").alias("_ends_with_newline"),
        (value == "").alias("_empty"),
        F.split(value, "\n").alias("_pieces"),
    ).select(
        "*", F.size("_pieces").alias("_n")
    ).select(
        # _n is computed before the generator: computed after it, every exploded row would carry the array.
        "_file", "_ends_with_newline", "_empty", "_n", F.posexplode("_pieces").alias("_pos", "_piece"),
    ).filter(is_line).transform(lambda lines: with_batch_constants(lines, {"_arrival_ms": arrival_ms})).select(
        F.when(followed_by_newline & piece.endswith("\r"), piece.substr(F.lit(1), F.length(piece) - 1))
        .otherwise(piece)
        .alias("payload"),
        _no_record(),
        F.lit(source_name).alias("source"),
        F.col("_file").alias("source_partition"),
        (position + 1).cast("string").alias("source_offset"),
        F.expr("timestamp_millis(_arrival_ms)").alias("arrival_time"),
    )
