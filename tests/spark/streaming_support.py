"""Frames for the streaming-job tests, built from literals in the JVM.

spark.createDataFrame(python rows) pickles a function, which pyspark 3.3 cannot do on Python 3.11,
so test frames are made of literals instead: one JSON text parsed in the JVM, or F.lit / F.array / F.struct.
"""

from __future__ import annotations

import json

from pyspark.sql import functions as F

from glue_jobs.schema import envelope_schema


def literal_frame(spark, rows: list[dict], schema):
    """A frame of `rows` (dicts, missing keys -> null) with exactly `schema`.

    Rows whose values are all strings, booleans, ints or nulls travel as one JSON text parsed by from_json: one
    literal instead of one F.lit per value, which for 600 rows took ~17 s of Py4J calls before Spark ran anything.
    Other values (timestamps, decimals, bytes) take the per-value literals."""
    from pyspark.sql import types as T

    if rows and all(_json_exact(row.get(f.name), f.dataType) for row in rows for f in schema.fields):
        text = json.dumps([{f.name: row.get(f.name) for f in schema.fields} for row in rows])
        parsed = F.from_json(F.lit(text), T.ArrayType(schema))
        frame = spark.range(1).select(F.explode(parsed).alias("r")).select("r.*")
        return frame
    structs = [
        F.struct(*(F.lit(row.get(f.name)).cast(f.dataType).alias(f.name) for f in schema.fields)) for row in rows
    ]
    empty = F.array().cast(f"array<{schema.simpleString()}>")
    return spark.range(1).select(F.explode(F.array(*structs) if structs else empty).alias("r")).select("r.*")


def _json_exact(value, kind) -> bool:
    """Whether from_json reads `value` back as itself for a field of type `kind` (no value it would null or coerce)."""
    from pyspark.sql import types as T

    if value is None:
        return True
    if isinstance(kind, T.StringType):
        return isinstance(value, str)
    if isinstance(kind, T.BooleanType):
        return isinstance(value, bool)
    if isinstance(kind, (T.IntegerType, T.LongType)) and isinstance(value, int) and not isinstance(value, bool):
        bits = 31 if isinstance(kind, T.IntegerType) else 63
        return -(2 ** bits) <= value < 2 ** bits
    return False


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
