"""Compaction's check before it deletes (docs/compaction.md "Per partition, in order", step 5): the staged output holds
every input row but the duplicate copies dropped, shown by counts of both sides.

What is counted, an `Account` of a set of rows: the rows, the rows without a key (a null key field), for every column
the non-null values, and the keys as a sum of their xxhash64 values (each key's 64 bits taken as an unsigned number,
summed exactly: two long sums of 32-bit halves, which cannot overflow below 2^31 rows). The sum is order-independent
and one aggregation computes it; two multisets of keys with the same sum, the same row count and the same number of
keyless rows differ only where their hashes collide or cancel: for one key lost and another gained that is a 64-bit
collision (2^-64), for any other difference a sum of 64-bit values hitting one exact number. The expected output is
the inputs' account minus the dropped copies' account: RankInRuns' own account of the copies it drops, where the jar
is loaded (it fails on a key whose rows are not one run, so each dropped copy's key is kept once), else the copies
Spark's window marks (compaction/transforms.py mark_copies). The output's account is read back from storage: its
footers (compaction/footers.py: rows, columns, a flat column's non-null values from its chunks' null counts) and
one Spark job reading the key and nested columns.

The inputs' columns are their files' own: the Spark schemas their footers carry (or Spark's schema merge, which reads
every footer, for files another writer wrote or without the jar), not the dataset's schema the rows are read with,
so a file of another dataset or with a column the dataset lacks fails here (its extra column would be read as
nothing at all). Given that, the inputs read with the dataset's schema give each of
their physical columns' counts (a column a file lacks is null there, as in the file).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from compaction.footers import FooterSummary
from compaction.results import CompactionError
from glue_jobs.lake.lake_table import LakeTable

_LOW = 0xFFFFFFFF
SHOWN_COLUMNS = 4  # a failure names this many columns whose counts differ, then how many more do


class CheckFailed(CompactionError):
    """The staged output does not hold what the inputs say it must: nothing is published, no input is deleted."""


@dataclass(frozen=True)
class Account:
    rows: int
    keyless: int  # rows with a null key field (never dropped as duplicates)
    key_sum: int  # the sum of the keyed rows' xxhash64(key) as unsigned 64-bit numbers
    non_null: dict[str, int] = field(default_factory=dict)  # column -> its non-null values

    def minus(self, other: Account) -> Account:
        names = {*self.non_null, *other.non_null}
        return Account(self.rows - other.rows, self.keyless - other.keyless, self.key_sum - other.key_sum,
                       {c: self.non_null.get(c, 0) - other.non_null.get(c, 0) for c in names})


def key_hash(table: LakeTable):
    """The key's hash every Account sums: Spark's xxhash64 of the key fields."""
    from pyspark.sql import functions as F

    return F.xxhash64(*(F.col(f"`{k}`") for k in table.key))


def aggregates(table: LakeTable, columns: list[str], *, prefix: str = "", where=None) -> list:
    """The aggregate columns of an Account of the rows (those where `where` holds), named `prefix`...; read back by
    `account`. `columns`: the columns to count the non-null values of (those present)."""
    from pyspark.sql import functions as F

    def only(value):
        return value if where is None else F.when(where, value)

    has_key = F.lit(True)
    for name in table.key:
        has_key = has_key & F.col(f"`{name}`").isNotNull()
    hashed = key_hash(table)
    keyed = has_key if where is None else has_key & where
    return [
        F.count(only(F.lit(1))).alias(f"{prefix}rows"),
        F.count(only(F.when(~has_key, F.lit(1)))).alias(f"{prefix}keyless"),
        F.sum(F.when(keyed, hashed.bitwiseAND(F.lit(_LOW)))).alias(f"{prefix}key_low"),
        F.sum(F.when(keyed, F.shiftrightunsigned(hashed, 32))).alias(f"{prefix}key_high"),
        *(F.count(only(F.col(f"`{c}`"))).alias(f"{prefix}nn_{i}") for i, c in enumerate(columns)),
    ]


def account(metrics: dict, columns: list[str], *, prefix: str = "") -> Account:
    """The Account in `metrics` (an observation's or an aggregation's row as a dict) that `aggregates` named."""
    def number(name: str) -> int:
        return int(metrics.get(f"{prefix}{name}") or 0)

    return Account(number("rows"), number("keyless"), number("key_low") + (number("key_high") << 32),
                   {c: number(f"nn_{i}") for i, c in enumerate(columns)})


def output_account(spark, table: LakeTable, paths: list[str], footers: FooterSummary | None = None
                   ) -> tuple[Account, list[str]]:
    """The staged files as written: their Account, read back from storage, and their physical columns. A column a file
    lacks counts no value, whatever the dataset says. With their `footers` (compaction/footers.py), a top-level primitive
    column's non-null values are its chunks' rows less their null counts, and Spark reads only the key and the columns
    the footers do not count (nested ones); without, one Spark job reads every column after a schema merge."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    if footers is not None and not footers.unschemed:
        schema = footers.merged()
    else:
        footers, schema = None, spark.read.option("mergeSchema", "true").parquet(*paths).schema
    present = [f.name for f in schema.fields]
    wanted = [name for name, _ in table.data_columns()]
    counted = [c for c in wanted if c in present] + [c for c in present if c not in wanted]
    by_spark = counted if footers is None else [c for c in counted if footers.non_null.get(c) is None]
    read = list(dict.fromkeys([*(k for k in table.key if k in present), *by_spark]))
    fields = {f.name: f for f in schema.fields}
    frame = spark.read.schema(T.StructType([fields[c] for c in read])).parquet(*paths)
    key_missing = [k for k in table.key if k not in present]
    if key_missing:  # the key itself written away: every row keyless
        frame = frame.select("*", *(F.lit(None).cast("string").alias(k) for k in key_missing))
    found = account(frame.agg(*aggregates(table, by_spark)).first().asDict(), by_spark)
    if footers is not None:
        found = Account(found.rows, found.keyless, found.key_sum,
                        {c: found.non_null[c] if c in found.non_null else footers.non_null[c] for c in counted})
    return found, present


def physical_schema(spark, paths: list[str], footers: FooterSummary | None = None):
    """The inputs' columns as their files hold them: the Spark schemas their `footers` carry (compaction/footers.py),
    each distinct column once; where the footers were not read or a file carries no Spark schema, every footer's
    schema, merged (Spark's schema merge, one job that reads only footers), and a column that two files hold with
    types Spark cannot merge fails it: CheckFailed."""
    if footers is not None and not footers.unschemed:
        return footers.merged()
    try:
        return spark.read.option("mergeSchema", "true").parquet(*paths).schema
    except Exception as error:  # AnalysisException / SparkException "Failed to merge incompatible data types"
        raise CheckFailed(f"the input files' own schemas do not merge: {str(error).splitlines()[0]}") from None


def foreign_columns(physical, table: LakeTable) -> list[str]:
    """What the inputs' physical schema holds that the dataset's lake table does not: a column it lacks, or a column of
    another type (at any depth; a struct may lack fields the dataset added later). Names compare as Spark reads Parquet
    columns, ignoring case."""
    from compaction.transforms import data_schema

    expected = {f.name.lower(): f for f in data_schema(table).fields}
    problems = []
    for found in physical.fields:
        wanted = expected.get(found.name.lower())
        if wanted is None:
            problems.append(f"column `{found.name}` ({found.dataType.simpleString()}) is not a column of {table.name}")
        elif not _fits(found.dataType, wanted.dataType):
            problems.append(f"column `{found.name}` is {found.dataType.simpleString()} in the files, "
                            f"{wanted.dataType.simpleString()} in {table.name}")
    return problems


def _fits(found, wanted) -> bool:
    from pyspark.sql import types as T

    if isinstance(found, T.StructType) and isinstance(wanted, T.StructType):
        fields = {f.name.lower(): f.dataType for f in wanted.fields}
        return all(f.name.lower() in fields and _fits(f.dataType, fields[f.name.lower()]) for f in found.fields)
    if isinstance(found, T.ArrayType) and isinstance(wanted, T.ArrayType):
        return _fits(found.elementType, wanted.elementType)
    if isinstance(found, T.MapType) and isinstance(wanted, T.MapType):
        return _fits(found.keyType, wanted.keyType) and _fits(found.valueType, wanted.valueType)
    return found.simpleString() == wanted.simpleString()


def differences(expected: Account, found: Account, *, columns: list[str]) -> list[str]:
    """Each way `found` (the output) differs from `expected`, in words; [] when they agree."""
    problems = []
    if found.rows != expected.rows:
        problems.append(f"row count {found.rows} in the output, {expected.rows} expected")
    if found.keyless != expected.keyless:
        problems.append(f"rows without a key {found.keyless} in the output, {expected.keyless} in the inputs")
    if found.key_sum != expected.key_sum:
        problems.append("the set of keys differs (the sums of their hashes differ)")
    counts = [f"column `{c}` non-null count {found.non_null.get(c, 0)} in the output, {expected.non_null.get(c, 0)} expected"
              for c in columns if found.non_null.get(c, 0) != expected.non_null.get(c, 0)]
    more = [f"{len(counts) - SHOWN_COLUMNS} other columns' non-null counts too"] if len(counts) > SHOWN_COLUMNS else []
    return problems + counts[:SHOWN_COLUMNS] + more


def check(where: str, problems: list[str]) -> None:
    """CheckFailed naming every check that failed for `where` (a partition), when any did."""
    if problems:
        raise CheckFailed(f"compaction check failed for {where}: {'; '.join(problems)}; nothing was published, "
                          "the inputs are in place")
