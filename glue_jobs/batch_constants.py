"""Per-batch values (processing time, batch id, arrival time) as data, not literals.

Every micro-batch of a streaming query runs the same plans with other per-batch values. Spark writes a
long literal into the Java code it generates for a stage and compiles each distinct code once, so a value
written as a literal made every micro-batch compile its stages anew and run them on cold, not yet
JIT-compiled code (figures: docs/streaming-job.md, "Benchmark history"). Values of a table are data: the
optimizer does not fold them into the expressions, and the generated code repeats from batch to batch.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F


def with_batch_constants(frame: DataFrame, values: dict[str, int]) -> DataFrame:
    """`frame` with one bigint column per entry of `values`, the same in every row, joined from a one-row
    inline table (broadcast, no shuffle) rather than added as literals (see the module doc for why)."""
    names = list(values)
    if not names or any(not name.isidentifier() for name in names):
        raise ValueError(f"batch constant names must be identifiers: {names}")
    row = ", ".join(f"CAST({int(value)} AS BIGINT)" for value in values.values())
    constants = frame.sparkSession.sql(f"SELECT * FROM VALUES ({row}) AS batch_constants({', '.join(names)})")
    return frame.crossJoin(F.broadcast(constants))
