"""Per-batch values (processing time, batch id, arrival time) held by reference, not written into generated code.

Every micro-batch of a streaming query runs the same plans with other per-batch values. Spark writes a
long literal into the Java code it generates for a stage and compiles each distinct code once, so a value
written as a literal made every micro-batch compile its stages anew and run them on cold, not yet
JIT-compiled code (figures: docs/streaming-job.md, "Benchmark history").

Spark writes a long literal into the code it generates as text, and keeps an array literal as an object the code
refers to (`references[n]`): read in the generated code (`debug.codegenString`) of Spark 3.3.4, 3.5.4 and 4.1.1, and
checked there by tests/spark/test_streaming_contract.py; the source was not read (unverified beyond that: that this is
`Literal.doGenCode`'s `ctx.addReferenceObj` for every non-primitive type). So a value here is an
element of a one-element array literal, picked at an index the optimizer cannot compute ahead
(`spark_partition_id() * 0 + 1`: nondeterministic, so ConstantFolding leaves it, and with it the `element_at`,
alone; an index it could compute would fold the whole expression back into a long literal). The array stays a
reference: the generated code is the same from batch to batch. Before, the values were joined from a one-row
table: the same effect, but each join broadcast that row, a Spark job of its own, four per micro-batch.
tests/spark/test_streaming_contract.py counts the compilations of a second batch (none) on every Spark line.
"""

from __future__ import annotations

from pyspark.sql import DataFrame


def batch_constant(value: int) -> str:
    """`value` as a non-null bigint SQL expression, the same in every row, held by reference in the generated code
    (module doc). The coalesce's 0 is written into the code, but it is the same in every batch; it tells Spark the
    column is never null (element_at's result is nullable)."""
    return f"coalesce(element_at(array(CAST({int(value)} AS BIGINT)), spark_partition_id() * 0 + 1), CAST(0 AS BIGINT))"


def with_batch_constants(frame: DataFrame, values: dict[str, int]) -> DataFrame:
    """`frame` with one bigint column per entry of `values`, the same in every row (`batch_constant`). One select of SQL
    expressions, a few py4j round trips: built with `F.` functions, each constant took about thirty (glue_jobs/column_seq.py)."""
    names = list(values)
    if not names or any(not name.isidentifier() for name in names):
        raise ValueError(f"batch constant names must be identifiers: {names}")
    return frame.selectExpr("*", *(f"{batch_constant(value)} AS `{name}`" for name, value in values.items()))
