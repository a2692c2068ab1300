"""Steps 3-6 of a partition's compaction (docs/compaction.md "Per partition, in order"): read exactly the
listed inputs, drop duplicate keys, write the rows to staging in files near the target size, and check that the
staged files hold every input row but the copies dropped (compaction/verify.py). Nothing here touches the
partition: publishing is the Compactor's."""

from __future__ import annotations

import contextlib
import json
import logging
import math
import statistics
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from compaction import footers, layout, verify
from compaction.discovery import data_files
from compaction.faults import FaultInjector
from compaction.footers import FooterSummary
from compaction.layout import HourPartition, LakePaths
from compaction.settings import MB
from compaction.transforms import (
    CONTENT_HASH,
    DUPLICATE_RANK,
    KEPT_HASH,
    Survivors,
    content_columns,
    data_columns,
    data_schema,
    mark_copies,
    survivors_in_runs,
)
from glue_jobs.lake.lake_table import LakeTable
from glue_jobs.lake.storage import FileInfo, HadoopStorage
from glue_jobs.session import session_conf

log = logging.getLogger("compaction")
KEY_HASH = "_key_hash"  # the key's hash (compaction/verify.py key_hash), beside the rows RankInRuns ranks

# Staged files whose average size is outside this band of the target are re-staged once with the file
# count the measured size calls for (the first count is an estimate from the input bytes).
SIZE_BAND = (0.5, 1.5)
# Output bytes per input byte before any run has measured it: small files carry per-file overhead
# (footer, one dictionary per column chunk), so compacted output is usually smaller; 1.0 errs towards
# more, smaller files, which the re-stage corrects.
DEFAULT_BYTES_RATIO = 1.0
BYTES_RATIO_LIMITS = (0.02, 2.0)
MAX_OUTPUT_FILES = 10_000
_LISTING_PARALLELISM = "spark.sql.sources.parallelPartitionDiscovery.parallelism"


@dataclass
class Stager:
    """Stages the partitions of one run. It remembers the output/input byte ratio across runs
    (LakePaths.sizing): read when the run starts, the median of what this run measured saved at its end."""

    spark: Any  # the run's SparkSession
    storage: HadoopStorage
    paths: LakePaths
    run_id: str
    target_file_bytes: int
    faults: FaultInjector
    table: LakeTable = field(default_factory=LakeTable.of)
    _bytes_ratio: float = field(init=False)
    _measured_ratios: list[float] = field(init=False, default_factory=list)

    def __post_init__(self) -> None:
        self._bytes_ratio = self._read_bytes_ratio()

    def stage(self, partition: HourPartition, inputs: list[FileInfo]) -> dict:
        """Write the deduplicated rows to staging and verify them; the journal's staged fields."""
        staging = self.paths.staging(self.run_id, partition)
        target = self.target_file_bytes
        paths = [f.path for f in inputs]
        file_count = self._estimate_file_count(inputs)
        # one shuffle: sizes the output and groups each key
        survivors, tally = self._survivors(self._read_exactly(paths).repartition(file_count, *self._key),
                                           name=f"compaction_{partition.date_dir}_{partition.hour_dir}".replace("=", "_"))
        attempt = f"{staging}/attempt-1"
        self.faults.watch_staging(lambda: self.storage.exists(staging))
        # The inputs' footers are read while the rows are written (on S3 each is a request or two): the check of their
        # columns needs them only before anything is published.
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="input-footers") as pool:
            input_footers = pool.submit(footers.summary, self.spark, paths, schemas_only=True,
                                        sizes=[f.size for f in inputs])
            self.faults.staged(survivors.frame, self.table).write.option("compression", "snappy").parquet(attempt)
            with self._listing_parallelism():
                physical = verify.physical_schema(self.spark, paths, input_footers.result())
        verify.check(partition.key, verify.foreign_columns(physical, self.table))
        rows_in, duplicates = survivors.counts()
        read, dropped, differing = tally()
        files, rows_out, written = self._verify_staged(partition, attempt, rows_in - duplicates)
        expected = read.minus(dropped)
        self._check_output(partition, files, written, expected, physical)

        staged_bytes = sum(f.size for f in files)
        if not any(layout.output_run_id(f.name) for f in inputs) and inputs and sum(f.size for f in inputs):
            self._measured_ratios.append(staged_bytes / sum(f.size for f in inputs))
        restaged = False
        ideal = min(MAX_OUTPUT_FILES, max(1, round(staged_bytes / target)))
        average = staged_bytes / max(1, len(files))
        if files and ideal != len(files) and not SIZE_BAND[0] * target <= average <= SIZE_BAND[1] * target:
            log.info("%s: %d staged files average %.1f MB, re-staging as %d", partition, len(files), average / MB, ideal)
            attempt = f"{staging}/attempt-2"
            (
                self._read_exactly([f.path for f in files])
                .repartition(ideal, *self._key)
                .sortWithinPartitions(*self._key)
                .write.option("compression", "snappy")
                .parquet(attempt)
            )
            files, _, written = self._verify_staged(partition, attempt, rows_out)
            self._check_output(partition, files, written, expected, physical)
            restaged = True
        return {
            "rows_in": rows_in,
            "duplicates": duplicates,
            "differing_duplicates": differing,
            "rows_out": rows_out,
            "restaged": restaged,
            "outputs": [
                {"staged": f.path, "name": layout.output_name(self.run_id, i), "size": f.size}
                for i, f in enumerate(files)
            ],
        }

    def _check_output(self, partition: HourPartition, files: list[FileInfo], written: FooterSummary | None,
                      expected: verify.Account, physical) -> None:
        """The staged files read back against `expected`, and every column of the inputs' files among theirs."""
        found, present = verify.output_account(self.spark, self.table, [f.path for f in files], written) if files else (
            verify.Account(0, 0, 0), [])
        lost = [f.name for f in physical.fields if files and f.name.lower() not in {p.lower() for p in present}]
        problems = [f"column `{name}` of the input files is not in the output" for name in lost]
        columns = list(dict.fromkeys([*data_columns(self.table), *found.non_null]))
        verify.check(partition.key, problems + verify.differences(expected, found, columns=columns))

    def _survivors(self, rows, *, name: str):
        """The survivors of `rows` (hash-partitioned by the key), and `tally`: after the write, the Accounts of the rows
        read and of the copies dropped, and how many of those differ from the kept copy. Where the jar is loaded,
        RankInRuns keeps the survivors of the rows sorted by the key and accounts for the rows it reads and the copies it
        drops in the same pass (their columns' non-null values and key hashes; the copies that differ from the kept
        one), failing if a key's rows are not one run. Else Spark's window ranks them, and one observation of its ranks
        accounts for both (mark_copies' content hashes; the window, the hashes and the observation cost about 1.5 s
        more per million rows, docs/performance.md)."""
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        columns = data_columns(self.table)
        hashed = rows.select(*(F.col(f"`{c}`") for c in columns), verify.key_hash(self.table).alias(KEY_HASH))
        survivors = survivors_in_runs(hashed, self.table, content=content_columns(self.table), key_hash=KEY_HASH)
        if survivors is not None:
            return survivors, survivors.accounts

        marked = mark_copies(rows, self.table)
        dropped = F.col(DUPLICATE_RANK) > 1
        measures = [*verify.aggregates(self.table, columns, prefix="in_"),
                    *verify.aggregates(self.table, columns, prefix="dropped_", where=dropped),
                    F.count(F.when(dropped & (F.col(CONTENT_HASH) != F.col(KEPT_HASH)), F.lit(1))).alias("differing")]
        observation = Observation(name)
        kept = marked.observe(observation, *measures).filter(~dropped).select(*(F.col(f"`{c}`") for c in columns))

        def window_tally() -> tuple[verify.Account, verify.Account, int]:
            metrics = observation.get
            return (verify.account(metrics, columns, prefix="in_"), verify.account(metrics, columns, prefix="dropped_"),
                    int(metrics["differing"] or 0))

        return Survivors(kept, lambda: (int(observation.get["in_rows"]), int(observation.get["dropped_rows"]))), window_tally

    @property
    def _key(self) -> list[str]:
        return [f"`{name}`" for name in self.table.key]

    def save_bytes_ratio(self) -> None:
        """Remember how much smaller compacted output was than its small input files, for the next
        run's first estimate of the file count."""
        if not self._measured_ratios:
            return
        ratio = statistics.median(self._measured_ratios)
        self.storage.write_text(self.paths.sizing, json.dumps(
            {"bytes_ratio": round(ratio, 4), "measured_by": self.run_id, "partitions": len(self._measured_ratios)}))

    def _read_exactly(self, paths: list[str]):
        """A frame over exactly these files, never their directory; the explicit schema means no footer
        is read to infer one, and the partition columns come from the directory, not the files."""
        with self._listing_parallelism():
            return parquet_files(self.spark.read.schema(data_schema(self.table)), paths)

    def _listing_parallelism(self):
        # Spark checks explicitly listed files with a parallel job of one task per path (up to 10,000)
        # once there are more than 32; thousands of one-file tasks cost far more than the check. The
        # cluster's parallelism keeps the listing parallel on S3 without the per-task overhead.
        return session_conf(self.spark, {_LISTING_PARALLELISM: str(max(1, self.spark.sparkContext.defaultParallelism))})

    def _estimate_file_count(self, inputs: list[FileInfo]) -> int:
        compacted = sum(f.size for f in inputs if layout.output_run_id(f.name))
        other = sum(f.size for f in inputs if not layout.output_run_id(f.name))
        estimate = compacted + other * self._bytes_ratio
        return min(MAX_OUTPUT_FILES, max(1, round(estimate / self.target_file_bytes)))

    def _verify_staged(self, partition: HourPartition, directory: str, expected_rows: int
                       ) -> tuple[list[FileInfo], int, FooterSummary | None]:
        """The staged files, listed, their rows, read back from storage, which must be `expected_rows`, and their
        footers' summary (None without the jar)."""
        files = data_files(self.storage, directory)
        written = footers.summary(self.spark, [f.path for f in files], sizes=[f.size for f in files]) if files else None
        rows = written.rows if written is not None else self._footer_rows([f.path for f in files]) if files else 0
        if rows != expected_rows:
            verify.check(partition.key, [f"staged {rows} rows in {directory}, expected {expected_rows} "
                                         "(input rows - duplicates)"])
        return files, rows, written

    def _footer_rows(self, paths: list[str]) -> int:
        """The rows of these Parquet files as their footers declare them: what Spark's count() of Parquet files
        reads as well (each row group's row count, no page decoded), without a Spark job (docs/performance.md:
        0.1 s a partition). A few files at a time: on S3 a footer is one or two requests."""
        jvm, conf = self.spark.sparkContext._jvm, self.spark.sparkContext._jsc.hadoopConfiguration()
        path_class, input_file = jvm.org.apache.hadoop.fs.Path, jvm.org.apache.parquet.hadoop.util.HadoopInputFile
        reader_class = jvm.org.apache.parquet.hadoop.ParquetFileReader

        def rows(path: str) -> int:
            reader = reader_class.open(input_file.fromPath(path_class(path), conf))
            try:
                return int(reader.getRecordCount())
            finally:
                reader.close()

        with ThreadPoolExecutor(max_workers=min(8, len(paths)), thread_name_prefix="footer") as pool:
            return sum(pool.map(rows, paths))

    def _read_bytes_ratio(self) -> float:
        with contextlib.suppress(Exception):
            ratio = float(json.loads(self.storage.read_text(self.paths.sizing))["bytes_ratio"])
            if math.isfinite(ratio):
                return min(max(ratio, BYTES_RATIO_LIMITS[0]), BYTES_RATIO_LIMITS[1])
        return DEFAULT_BYTES_RATIO


def parquet_files(reader, paths: list[str]):
    """`reader.parquet(*paths)`, the paths handed to the JVM as one string split there: PySpark passes a list of paths
    as a Java list that py4j fills one `add` call at a time (py4j's ListConverter), a round trip per path, about 0.15 s
    for a partition of 2,000 files here (docs/performance.md). DataFrameReader.parquet is Scala varargs
    (@scala.annotation.varargs), so it takes the String[] the split returns."""
    if len(paths) < 32 or any("\n" in p for p in paths):
        return reader.parquet(*paths)
    jvm = reader._spark.sparkContext._jvm
    return reader._df(reader._jreader.parquet(jvm.java.util.regex.Pattern.compile("\n").split("\n".join(paths))))
