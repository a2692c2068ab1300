"""Frames for the streaming-job tests, built from literals in the JVM.

spark.createDataFrame(python rows) pickles a function, which pyspark 3.3 cannot do on Python 3.11,
so test frames are made of literals (F.lit / F.array / F.struct) instead.
"""

from __future__ import annotations

from pyspark.sql import functions as F

from glue_jobs.schema import envelope_schema


def literal_frame(spark, rows: list[dict], schema):
    """A frame of `rows` (dicts, missing keys -> null) with exactly `schema`."""
    structs = [
        F.struct(*(F.lit(row.get(f.name)).cast(f.dataType).alias(f.name) for f in schema.fields)) for row in rows
    ]
    empty = F.array().cast(f"array<{schema.simpleString()}>")
    return spark.range(1).select(F.explode(F.array(*structs) if structs else empty).alias("r")).select("r.*")


def json_envelope(spark, payloads: list[str], *, source: str = "test", partition: str = "p0", arrival_ms: int = 0,
                  offsets: list[str] | None = None):
    """Envelope rows for JSON payloads, offsets 1..n unless given."""
    offsets = offsets or [str(i + 1) for i in range(len(payloads))]
    rows = [{"payload": p, "source": source, "source_partition": partition, "source_offset": o}
            for p, o in zip(payloads, offsets, strict=True)]
    schema = envelope_schema()
    frame = literal_frame(spark, rows, schema)
    return frame.select(
        *(F.expr(f"timestamp_millis({arrival_ms})").alias(c) if c == "arrival_time" else F.col(c) for c in frame.columns)
    )
