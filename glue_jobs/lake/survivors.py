"""Which copy of a duplicated event_id survives, one order for the streaming job and the compaction; and a copy's content
hash, which tells a dropped copy that differs from the kept one.

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


def content_hash(columns: list) -> object:
    """One 64-bit hash (Spark's xxhash64) of a copy's content: `columns` is [(column, its Spark data type)], in an order
    every caller keeps. Equal values hash alike at any depth, a map's entries in any order included (`_hashable`).
    Each column is hashed on its own first: Spark's hash of several columns skips a null one, so (null, x) and (x, null)
    would hash alike; one column's hash is never null (a null hashes to the seed). Used by the compaction (which copies
    it drops differ from the one it keeps) and by the streaming job's collapse within a micro-batch."""
    from pyspark.sql import functions as F

    return F.xxhash64(*(F.xxhash64(_hashable(column, data_type)) for column, data_type in columns))


def _hashable(column, data_type):
    """`column` in a form Spark's hash functions take and that hashes equal values alike: a map (which they refuse, and
    whose entry order is not its value) as its entries sorted by key, at any depth."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    if not any(isinstance(t, T.MapType) for t in _types_within(data_type)):
        return column
    if isinstance(data_type, T.MapType):
        entries = F.transform(F.map_entries(column), lambda e: F.struct(
            e["key"].alias("key"), _hashable(e["value"], data_type.valueType).alias("value")))
        return F.array_sort(entries)
    if isinstance(data_type, T.ArrayType):
        return F.transform(column, lambda x: _hashable(x, data_type.elementType))
    return F.struct(*(_hashable(column[f.name], f.dataType).alias(f.name) for f in data_type.fields))


def _types_within(data_type):
    from pyspark.sql import types as T

    yield data_type
    if isinstance(data_type, T.StructType):
        for f in data_type.fields:
            yield from _types_within(f.dataType)
    elif isinstance(data_type, T.ArrayType):
        yield from _types_within(data_type.elementType)
    elif isinstance(data_type, T.MapType):
        yield from _types_within(data_type.keyType)
        yield from _types_within(data_type.valueType)
