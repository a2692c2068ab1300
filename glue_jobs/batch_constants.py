"""Per-batch values (processing time, batch id, arrival time) held by reference, not written into generated code.

Every micro-batch of a streaming query runs the same plans with other per-batch values. Spark writes a
long literal into the Java code it generates for a stage and compiles each distinct code once, so a value
written as a literal made every micro-batch compile its stages anew and run them on cold, not yet
JIT-compiled code (figures: docs/streaming-job.md, "Benchmark history").

Spark's `Literal.doGenCode` writes a boolean, int, long, float, double or date literal into the code as text, and
keeps any other literal (a string, a decimal, an array) as an object the code refers to (`ctx.addReferenceObj`;
apache/spark sql/catalyst expressions/literals.scala, the same in 3.3, 3.5 and 4.1). So a value here is an
element of a one-element array literal, picked at an index the optimizer cannot compute ahead
(`spark_partition_id() * 0 + 1`: nondeterministic, so ConstantFolding leaves it, and with it the `element_at`,
alone; an index it could compute would fold the whole expression back into a long literal). The array stays a
reference: the generated code is the same from batch to batch. Before, the values were joined from a one-row
table: the same effect, but each join broadcast that row, a Spark job of its own, four per micro-batch.
tests/spark/test_streaming_contract.py counts the compilations of a second batch (none) on every Spark line.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F


def batch_constant(value: int) -> Column:
    """`value` as a non-null bigint column, the same in every row, held by reference in the generated code (module doc)."""
    # The coalesce's 0 is a literal written into the code, but the same in every batch; it only tells Spark the
    # column is never null (element_at's result is nullable).
    held = F.element_at(F.array(F.lit(int(value)).cast("bigint")), F.spark_partition_id() * 0 + 1)
    return F.coalesce(held, F.lit(0).cast("bigint"))


def with_batch_constants(frame: DataFrame, values: dict[str, int]) -> DataFrame:
    """`frame` with one bigint column per entry of `values`, the same in every row (`batch_constant`)."""
    names = list(values)
    if not names or any(not name.isidentifier() for name in names):
        raise ValueError(f"batch constant names must be identifiers: {names}")
    return frame.select("*", *(batch_constant(value).alias(name) for name, value in values.items()))
