"""What the footers of a set of Parquet files say about all of them (jvm/glue-functions Footers, read on the driver by a
few threads: no Spark job, one call for thousands of files): their rows, the Spark schemas they carry, and for each
top-level primitive column its non-null values, from the column chunks' statistics (Parquet's `null_count`). None
where the jar is not loaded; the callers then ask Spark (a job reading every footer, a job reading the values)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

FOOTERS_CLASS = "com.streamlake.glue.Footers"
# Footer reads at once: on S3 each is one or two requests, so waiting dominates; locally they are cheap either way.
THREADS = 16


@dataclass(frozen=True)
class FooterSummary:
    rows: int
    schemas: list = field(default_factory=list)  # each distinct Spark schema (StructType) the files carry
    unschemed: int = 0  # files without one (another writer): their schema is Spark's to read
    first_unschemed: str | None = None
    non_null: dict[str, int | None] = field(default_factory=dict)  # None: a chunk without a null count

    def merged(self):
        """Every distinct (name, type) column of the schemas, in order of appearance: the files' physical columns. Two
        files holding one column with different types give both; the caller checks each against the dataset."""
        from pyspark.sql import types as T

        seen, fields = set(), []
        for schema in self.schemas:
            for found in schema.fields:
                if (found.name.lower(), found.dataType.simpleString()) not in seen:
                    seen.add((found.name.lower(), found.dataType.simpleString()))
                    fields.append(found)
        return T.StructType(fields)


def summary(spark, paths: list[str], *, schemas_only: bool = False, sizes: list[int] | None = None
            ) -> FooterSummary | None:
    """The footers of `paths` summed up, or None where the Footers class is not on the classpath. `schemas_only`: their
    schemas, no row counts (rows 0, no non-null counts): the row groups' metadata is not parsed. `sizes`: each file's
    length from the caller's listing, so no file is asked for its status first (on S3 a HEAD request each)."""
    from py4j.java_gateway import JavaClass
    from pyspark.sql import types as T

    found = spark.sparkContext._jvm
    for part in FOOTERS_CLASS.split("."):
        found = getattr(found, part)
    if not isinstance(found, JavaClass) or not paths:
        return None
    if sizes is not None and not any("\t" in p or "\n" in p for p in paths):
        lines = [f"{path}\t{size}" for path, size in zip(paths, sizes, strict=True)]
    else:
        lines = list(paths)
    text = found.summary("\n".join(lines), spark.sparkContext._jsc.hadoopConfiguration(), THREADS, schemas_only)
    rows, schemas, unschemed, first, non_null = 0, [], 0, None, {}
    for line in text.splitlines():
        kind, _, rest = line.partition("\t")
        if kind == "rows":
            rows = int(rest)
        elif kind == "schema":
            schemas.append(T.StructType.fromJson(json.loads(rest)))
        elif kind == "unschemed":
            count, _, first = rest.partition("\t")
            unschemed = int(count)
        elif kind == "nonnull":
            name, _, count = rest.rpartition("\t")
            non_null[name] = None if count == "?" else int(count)
    return FooterSummary(rows, schemas, unschemed, first, non_null)
