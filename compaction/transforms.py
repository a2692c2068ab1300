"""DataFrame -> DataFrame steps of the compaction, pure PySpark (no UDFs: Glue 4.0's pyspark cannot
pickle Python functions on Python 3.11)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from glue_jobs.lake.lake_table import LakeTable
from glue_jobs.lake.survivors import SURVIVOR_ORDER, content_hash, survivor_first, survivor_order
from glue_jobs.schema import INGESTION_COLUMNS, PARTITION_COLUMNS

DUPLICATE_RANK = "_duplicate_rank"
# mark_copies' columns besides DUPLICATE_RANK: each row's content hash and its key's survivor's (the copy ranked 1).
CONTENT_HASH, KEPT_HASH = "_content_hash", "_kept_hash"
# jvm/glue-functions: the survivors of rows sorted survivor first, without Spark's window operator (survivors_in_runs).
RANK_IN_RUNS_CLASS = "com.streamlake.glue.RankInRuns"
_LOGGED: set[str] = set()
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
    by_key = survivor_first(*(f"`{c}`" for c in _tie_breakers(table)), key=tuple(f"`{k}`" for k in table.key))
    has_key = F.lit(True)
    for name in table.key:
        has_key = has_key & F.col(f"`{name}`").isNotNull()
    return events.select(
        *(F.col(f"`{c}`") for c in data_columns(table)),
        F.when(has_key, F.row_number().over(by_key)).otherwise(F.lit(1)).alias(DUPLICATE_RANK),
    )


def content_columns(table: LakeTable | None = None) -> list[str]:
    """The columns that make a copy's content: every data column but the ingestion metadata, which differs between
    copies of one record by nature (where and when each copy arrived, the batch that wrote it)."""
    ingestion = {name for name, _, _ in INGESTION_COLUMNS}
    return [c for c in data_columns(table) if c not in ingestion]


def mark_copies(events, table: LakeTable | None = None):
    """The data columns plus the window's verdict on each row (events hash-partitioned by the key): DUPLICATE_RANK as
    rank_duplicates gives it, CONTENT_HASH (xxhash64 of content_columns) and KEPT_HASH (the survivor's CONTENT_HASH).
    A dropped copy whose CONTENT_HASH differs from KEPT_HASH differs from the kept copy; one window, both functions
    over the same order. Rows without a key are their own survivor."""
    from pyspark.sql import functions as F

    table = table or LakeTable.of()
    by_key = survivor_first(*(f"`{c}`" for c in _tie_breakers(table)), key=tuple(f"`{k}`" for k in table.key))
    has_key = F.lit(True)
    for name in table.key:
        has_key = has_key & F.col(f"`{name}`").isNotNull()
    types = {f.name: f.dataType for f in data_schema(table).fields}
    hashed = events.select(*(F.col(f"`{c}`") for c in data_columns(table)),
                           content_hash([(F.col(f"`{c}`"), types[c]) for c in content_columns(table)]).alias(CONTENT_HASH))
    return hashed.select(
        *(F.col(f"`{c}`") for c in data_columns(table)),
        F.when(has_key, F.row_number().over(by_key)).otherwise(F.lit(1)).alias(DUPLICATE_RANK),
        F.col(CONTENT_HASH),
        F.when(has_key, F.first(CONTENT_HASH).over(by_key)).otherwise(F.col(CONTENT_HASH)).alias(KEPT_HASH))


@dataclass(frozen=True)
class Survivors:
    """The rows to stage, and how many rows went in and how many copies were dropped, to read once `frame` is written
    (the counts are taken while it is computed, not by a second pass)."""

    frame: Any  # a DataFrame: the data columns, one row per key, every keyless row
    _counts: Callable[[], tuple[int, int]]
    # The Accounts (compaction/verify.py) of the rows read and of the copies dropped, and how many of those differ from
    # the kept copy, where survivors_in_runs was asked to account for them.
    _accounts: Callable[[], tuple[Any, Any, int]] | None = None

    def counts(self) -> tuple[int, int]:
        """(rows in, duplicates dropped), after an action computed `frame`."""
        return self._counts()

    def accounts(self) -> tuple[Any, Any, int]:
        """(the rows read's Account, the dropped copies' Account, dropped copies differing from the kept one), after an
        action computed `frame`; only where survivors_in_runs was asked to account for them."""
        if self._accounts is None:
            raise ValueError("these survivors do not account for their rows")
        return self._accounts()


def survivors_by_window(events, table: LakeTable | None = None, *, name: str = "compaction") -> Survivors:
    """rank_duplicates' survivors, counted by an Observation named `name` (unique per query) of the ranks."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    observation = Observation(name)
    ranked = rank_duplicates(events, table).observe(
        observation, F.count(F.lit(1)).alias("rows_in"), F.sum((F.col(DUPLICATE_RANK) > 1).cast("long")).alias("duplicates"))

    def counts() -> tuple[int, int]:
        observed = observation.get
        return int(observed["rows_in"]), int(observed["duplicates"] or 0)

    return Survivors(drop_ranked_duplicates(ranked), counts)


def survivors_in_runs(events, table: LakeTable | None = None, *, content: list[str] | None = None,
                      key_hash: str | None = None) -> Survivors | None:
    """rank_duplicates' survivors for `events` already hash-partitioned by the key, without Spark's window operator or an
    Observation: each partition is sorted by the key, then survivor first, and jvm/glue-functions RankInRuns keeps the
    first row of each key's run in one pass, counting rows and dropped copies in accumulators as it goes (figures:
    docs/performance.md). None where that class is not loaded or cannot rank this frame (a key of a type it does not
    compare, Spark internals it does not find); the caller then ranks with the window. The reason is logged once.
    `content`: also account for the rows read and the copies dropped in
    the same pass (Survivors.accounts: compaction/verify.py's Account of each, their keys summed from the `key_hash`
    column of `events`, a long, not in the survivors), and count the dropped copies whose `content` columns differ from
    the kept copy's."""
    from py4j.java_gateway import JavaClass
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F

    table = table or LakeTable.of()
    session = events.sparkSession
    found = session._jvm
    for part in RANK_IN_RUNS_CLASS.split("."):
        found = getattr(found, part)
    if not isinstance(found, JavaClass):
        return _window_instead(f"{RANK_IN_RUNS_CLASS} is not on the classpath (jvm/glue-functions jar)")
    columns = data_columns(table)
    accounted = [*columns, key_hash] if content is not None else []
    ordered = events.select(*(F.col(f"`{c}`") for c in accounted or columns))
    ordered = ordered.sortWithinPartitions(
        *(F.col(f"`{k}`") for k in table.key), *survivor_order(*(f"`{c}`" for c in _tie_breakers(table))))
    context = session.sparkContext._jsc.sc()
    rows_in, duplicates = context.longAccumulator("compaction rows in"), context.longAccumulator("compaction duplicates")
    read, dropped = ([context.longAccumulator() for _ in range(len(accounted) + 3)] for _ in range(2))
    differing = context.longAccumulator()
    try:
        if content is None:
            kept = DataFrame(found.survivors(ordered._jdf, list(table.key), rows_in, duplicates), session)
        else:
            kept = DataFrame(found.survivorsAccounted(ordered._jdf, list(table.key), list(content), key_hash, rows_in,
                                                      duplicates, read, dropped, differing), session)
            kept = kept.select(*(F.col(f"`{c}`") for c in columns))
    except Exception as error:  # a key type it does not compare (named in its message), missing Spark internals, ...
        return _window_instead(f"{RANK_IN_RUNS_CLASS} cannot rank this frame on Spark {session.version}: {error}")
    _log_once(logging.INFO, f"duplicates ranked in sorted runs with {RANK_IN_RUNS_CLASS}")

    def account(accumulators, rows) -> Any:
        from compaction.verify import Account

        values = [int(a.value()) for a in accumulators]
        return Account(rows, values[-1], values[-3] + (values[-2] << 32), dict(zip(columns, values, strict=False)))

    accounts = None if content is None else lambda: (
        account(read, int(rows_in.value())), account(dropped, int(duplicates.value())), int(differing.value()))
    return Survivors(kept, lambda: (int(rows_in.value()), int(duplicates.value())), accounts)


def _window_instead(why: str) -> None:
    _log_once(logging.WARNING, f"duplicates ranked with the window: {why}")


def _log_once(level: int, message: str) -> None:
    if message not in _LOGGED:
        _LOGGED.add(message)
        logging.getLogger("compaction.transforms").log(level, "%s", message)


def _tie_breakers(table: LakeTable) -> list[str]:
    """batch_id, then every other column (SURVIVOR_ORDER first): the survivor does not depend on the order the files
    are read in. Map columns cannot be ordered; a tie between two rows alike in every other column is an exact copy."""
    orderable = [f.name for f in data_schema(table).fields if not f.dataType.simpleString().startswith(_UNORDERABLE)]
    return ["batch_id", *(c for c in orderable if c not in (*SURVIVOR_ORDER, "batch_id", *table.key))]


def drop_ranked_duplicates(ranked):
    """Keep the survivors of rank_duplicates, in the stored column order (rank_duplicates selected it)."""
    from pyspark.sql import functions as F

    is_survivor = F.col(DUPLICATE_RANK) == 1
    return ranked.filter(is_survivor).drop(DUPLICATE_RANK)


def deduplicate_events(events, table: LakeTable | None = None):
    return drop_ranked_duplicates(rank_duplicates(events, table))
