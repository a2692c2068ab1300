"""Column lists a batch repeats, sent to the JVM once.

Every micro-batch plans the same selects and aggregations with other data. pyspark sends a column list to the JVM
element by element: `DataFrame.select(*cols)` converts the Python list with py4j's `ListConverter`, which makes an
`ArrayList` and calls `add` once per element, each a round trip (py4j/java_collections.py, `ListConverter.convert`),
and every `F.` function and Column operator is one or more round trips more. `ColumnSeq` holds the JVM `Seq` of
built columns, so a batch plans a whole select with one call (figures: docs/performance.md, "The streaming runner's
fixed cost per batch").

Columns are unresolved expressions, bound to no frame or session: the same `Seq` serves every batch, including the
streaming query's cloned session. Callers keep a `ColumnSeq` per JVM (`SparkContext._jvm`), as the contract's stages
are kept (glue_jobs/contract/typed_contract.py `_selects`).
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame

__all__ = ["ColumnSeq", "aggregate", "select"]


class ColumnSeq:
    """A JVM `Seq` of `columns`, made once (one round trip per column, here only)."""

    def __init__(self, columns: Sequence[Column]) -> None:
        from pyspark import SparkContext

        if not columns:
            raise ValueError("a ColumnSeq needs at least one column")
        if SparkContext._jvm is None:
            raise RuntimeError("a ColumnSeq needs a running SparkContext")
        self.size = len(columns)
        self.seq = SparkContext._jvm.PythonUtils.toSeq([c._jc for c in columns])


def select(frame: DataFrame, columns: ColumnSeq) -> DataFrame:
    """`frame.select(*columns)`, planned with one call: pyspark's own `select` is `self._jdf.select(<Seq>)` wrapped
    in a DataFrame of the same session (pyspark/sql/dataframe.py on 3.3 and 3.5, pyspark/sql/classic/dataframe.py on
    4.x)."""
    return DataFrame(frame._jdf.select(columns.seq), frame.sparkSession)


def aggregate(frame: DataFrame, by: ColumnSeq | None, aggregates: ColumnSeq) -> DataFrame:
    """`frame.groupBy(*by).agg(*aggregates)` (without `by`: `frame.agg(*aggregates)`), planned with a few calls:
    pyspark's `GroupedData.agg` is `self._jgd.agg(<first column>, <Seq of the rest>)` (pyspark/sql/group.py)."""
    grouped = frame._jdf.groupBy(by.seq) if by is not None else frame._jdf.groupBy(_empty_seq())
    return DataFrame(grouped.agg(aggregates.seq.head(), aggregates.seq.tail()), frame.sparkSession)


def _empty_seq():
    from pyspark import SparkContext

    return SparkContext._jvm.PythonUtils.toSeq([])
