"""DataFrame -> DataFrame steps of the compaction, pure PySpark (no UDFs: Glue 4.0's pyspark cannot
pickle Python functions on Python 3.11)."""

from __future__ import annotations

from glue_jobs.lake_table import LakeTable
from glue_jobs.schema import PARTITION_COLUMNS
from glue_jobs.survivors import SURVIVOR_ORDER, survivor_first

DUPLICATE_RANK = "_duplicate_rank"
# Spark cannot order rows by a map column; a tie between two rows alike in every other column is an exact copy.
_UNORDERABLE = ("map<",)


def data_schema(table: LakeTable | None = None):
    """The lake row as stored in the files (default: clickstream's table): the partitions live in the directory names."""
    from pyspark.sql import types as T

    table = table or LakeTable.of()
    partition_names = {name for name, _, _ in PARTITION_COLUMNS}
    return T.StructType([f for f in table.spark_schema().fields if f.name not in partition_names])


def data_columns(table: LakeTable | None = None) -> list[str]:
    """The names of data_schema's fields, without asking the JVM (data_schema parses the DDL there; a caller in a
    loop made 60,000 round trips in one test)."""
    return [name for name, _ in (table or LakeTable.of()).data_columns()]


def rank_duplicates(events, table: LakeTable | None = None):
    """Add DUPLICATE_RANK: 1 for the surviving copy of each key (the dataset's `key` fields), 2.. for the
    copies to drop; duplicates are never looked for across datasets (each has its own table).

    Rows with a null key field (never valid per the contract) are all kept: nothing says they are the
    same record.
    """
    from pyspark.sql import functions as F

    table = table or LakeTable.of()
    schema = data_schema(table)
    # batch_id, then every other column: the survivor does not depend on the order the files are read in.
    orderable = [f.name for f in schema.fields if not f.dataType.simpleString().startswith(_UNORDERABLE)]
    tie_breakers = ["batch_id", *(c for c in orderable if c not in (*SURVIVOR_ORDER, "batch_id", *table.key))]
    by_key = survivor_first(*(f"`{c}`" for c in tie_breakers), key=tuple(f"`{k}`" for k in table.key))
    has_key = F.lit(True)
    for name in table.key:
        has_key = has_key & F.col(f"`{name}`").isNotNull()
    return events.select(
        *(F.col(f"`{c}`") for c in data_columns(table)),
        F.when(has_key, F.row_number().over(by_key)).otherwise(F.lit(1)).alias(DUPLICATE_RANK),
    )


def drop_ranked_duplicates(ranked):
    """Keep the survivors of rank_duplicates, in the stored column order (rank_duplicates selected it)."""
    from pyspark.sql import functions as F

    is_survivor = F.col(DUPLICATE_RANK) == 1
    return ranked.filter(is_survivor).drop(DUPLICATE_RANK)


def deduplicate_events(events, table: LakeTable | None = None):
    return drop_ranked_duplicates(rank_duplicates(events, table))
