"""DataFrame -> DataFrame steps of the compaction, pure PySpark (no UDFs: Glue 4.0's pyspark cannot
pickle Python functions on Python 3.11)."""

from __future__ import annotations

from glue_jobs.schema import PARTITION_COLUMNS, spark_lake_schema
from glue_jobs.survivors import SURVIVOR_ORDER, survivor_first

DUPLICATE_RANK = "_duplicate_rank"


def data_schema():
    """The lake row as stored in the files: the partition columns live in the directory names."""
    from pyspark.sql import types as T

    partition_names = {name for name, _, _ in PARTITION_COLUMNS}
    return T.StructType([f for f in spark_lake_schema().fields if f.name not in partition_names])


def data_columns() -> list[str]:
    return [f.name for f in data_schema().fields]


def rank_duplicates(events):
    """Add DUPLICATE_RANK: 1 for the surviving copy of each event_id, 2.. for the copies to drop.

    Rows without an event_id (never valid per the contract) are all kept: nothing says they are the
    same event.
    """
    from pyspark.sql import functions as F

    # batch_id, then every other column: the survivor does not depend on the order the files are read in.
    tie_breakers = ["batch_id", *(c for c in data_columns() if c not in (*SURVIVOR_ORDER, "batch_id", "event_id"))]
    by_event_id = survivor_first(*tie_breakers)
    has_event_id = F.col("event_id").isNotNull()
    return events.select(
        *data_columns(),
        F.when(has_event_id, F.row_number().over(by_event_id)).otherwise(F.lit(1)).alias(DUPLICATE_RANK),
    )


def drop_ranked_duplicates(ranked):
    """Keep the survivors of rank_duplicates, in the stored column order."""
    from pyspark.sql import functions as F

    is_survivor = F.col(DUPLICATE_RANK) == 1
    return ranked.filter(is_survivor).select(*data_columns())


def deduplicate_events(events):
    return events.transform(rank_duplicates).transform(drop_ranked_duplicates)
