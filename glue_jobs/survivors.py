"""Which copy of a duplicated event_id survives: one order for the streaming job and the compaction.

The first to arrive (`arrival_time`), then the lowest position in its source: `source`, `source_partition`,
then the offset or sequence number, compared as a number (decimal strings: by length, then text, so no
cast can overflow). Unknown values sort last. Callers close the remaining ties with their own columns:
the streaming job with the row's input order within the micro-batch, the compaction with `batch_id` and
then every other column, so its choice does not depend on the order it reads files in.
"""

from __future__ import annotations

SURVIVOR_ORDER = ("arrival_time", "source", "source_partition", "source_offset_length", "source_offset")


def survivor_order(*tie_breakers: str) -> list:
    """The order of a key's copies, the survivor first: SURVIVOR_ORDER, then `tie_breakers`, each ascending, nulls last.
    pyspark is imported here, not with the module: compaction's modules import without it."""
    from pyspark.sql import functions as F

    def ascending(name: str):
        column = F.length("source_offset") if name == "source_offset_length" else F.col(name)
        return column.asc_nulls_last()

    return [ascending(name) for name in (*SURVIVOR_ORDER, *tie_breakers)]


def survivor_first(*tie_breakers: str, key: tuple[str, ...] = ("event_id",)):
    """A window over the copies of each key (the dataset's `key` fields), in survivor_order."""
    from pyspark.sql import Window

    return Window.partitionBy(*key).orderBy(*survivor_order(*tie_breakers))
