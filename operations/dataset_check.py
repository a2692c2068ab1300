"""`streamlake dataset check NAME --sample FILE`: the dataset's real contract over sample records, locally.

The records go through the same adapter and contract the streaming job runs (glue_jobs.sources.from_local_files,
glue_jobs.lake.lake_table.LakeTable.validate) in a local Spark session: it prints the counts per reason, the first
dead letters with their field paths, and the Parquet schema the lake table would be written with.
"""

from __future__ import annotations

import time
from pathlib import Path

from operations.errors import ToolError


def check(name: str, sample: Path, *, show: int = 10, out=print) -> dict[str, int]:
    """Counts per reason ('valid' for the rest); prints the report through `out`."""
    from glue_jobs import datasets
    from glue_jobs.lake.lake_table import LakeTable
    from glue_jobs.session import local_session
    from glue_jobs.sources import from_local_files

    if not sample.is_file():
        raise ToolError(f"--sample {sample}: no such file")
    try:
        table = LakeTable.of(datasets.load(name, draft=True))
    except datasets.DatasetError as error:
        raise ToolError(str(error)) from None
    spark = local_session("streamlake-dataset-check", master="local[2]")
    raw = spark.read.format("text").option("wholetext", "true").load(str(sample.resolve()))
    validated = table.validate(from_local_files(raw, "sample", int(time.time() * 1000)), now_ms=int(time.time() * 1000)).cache()
    try:
        counts = {row["reason"] or "valid": row["count"] for row in validated.groupBy("reason").count().collect()}
        out(f"dataset {name}, {sum(counts.values())} record(s) from {sample}:")
        for reason, count in sorted(counts.items(), key=lambda item: (item[0] != "valid", item[0])):
            out(f"  {reason:24} {count}")
        rows = validated.where("reason IS NOT NULL").limit(show).select("source_offset", "reason", "detail", "payload").collect()
        if rows:
            out(f"first {len(rows)} dead letter(s) (line: reason, detail, payload):")
            for row in rows:
                payload = row["payload"] if len(row["payload"] or "") <= 120 else row["payload"][:117] + "..."
                out(f"  {row['source_offset']}: {row['reason']}, {row['detail']}, {payload}")
        out("lake table (Parquet) schema:")
        out(table.spark_schema().simpleString())
    finally:
        validated.unpersist()
    return counts
