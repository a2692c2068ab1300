"""HadoopStorage.delete_files: the JVM bulk delete (jvm/glue-functions BulkDelete) and the per-path fallback, on the
local filesystem through the Hadoop API (the same calls reach S3 in Glue)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from glue_jobs.lake import storage as storage_module
from glue_jobs.lake.storage import BULK_DELETE_CLASS, HadoopStorage, _bulk_chunk_size


def _files(root: Path, count: int) -> list[str]:
    root.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(count):
        (root / f"part-{i:03d}.parquet").write_text("x")
        paths.append(str(root / f"part-{i:03d}.parquet"))
    return paths


def _per_path(spark) -> HadoopStorage:
    fs = HadoopStorage(spark)
    fs._classes[BULK_DELETE_CLASS] = None  # as without the jar on the classpath
    return fs


def test_the_bulk_class_is_on_the_test_sessions_classpath(spark):
    assert HadoopStorage(spark)._bulk_delete is not None, f"{BULK_DELETE_CLASS} missing: build/jvm/glue-functions.jar"


@pytest.mark.parametrize("way", ["bulk", "per_path"])
def test_files_are_deleted_and_a_missing_path_is_not_counted(spark, tmp_path, way):
    fs = HadoopStorage(spark) if way == "bulk" else _per_path(spark)
    paths = _files(tmp_path / "part", 5)
    missing = str(tmp_path / "part" / "never-written.parquet")
    deleted = []
    assert fs.delete_files([*paths[:2], missing, *paths[2:]], threads=3, on_deleted=deleted.append) == 5
    assert sorted(deleted) == paths and not list((tmp_path / "part").iterdir())  # the .crc side files go too
    assert fs.delete_files([missing], on_deleted=deleted.append) == 0 and len(deleted) == 5
    assert fs.delete_files([]) == 0


def test_a_directory_is_never_deleted_recursively_and_the_other_paths_still_go(spark, tmp_path):
    fs = HadoopStorage(spark)
    paths = _files(tmp_path / "part", 3)
    directory = tmp_path / "part" / "event_hour=1"
    inside = _files(directory, 2)
    deleted = []
    # The FileSystem's IOException for a non-empty directory (its class differs between Hadoop lines)
    with pytest.raises(OSError, match=r"could not delete 1 of 4 file\(s\), e\.g\. .*event_hour=1: \S*Exception: "):
        fs.delete_files([paths[0], str(directory), *paths[1:]], threads=2, on_deleted=deleted.append)
    assert deleted == paths and all(Path(p).exists() for p in inside)
    assert sorted(p.name for p in (tmp_path / "part").iterdir()) == ["event_hour=1"]


def test_the_jvm_class_reports_each_path_in_one_string(spark, tmp_path):
    """The contract the Python side reads: one character per path, then a line per failure."""
    (path,) = _files(tmp_path / "a", 1)
    _files(tmp_path / "a" / "full", 1)
    jvm = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    text = jvm.com.streamlake.glue.BulkDelete.delete(conf, "\n".join([path, str(tmp_path / "no"), str(tmp_path / "a/full")]), 4)
    codes, failure = text.split("\n")
    assert codes == "DMF" and re.match(r"2\t\S*Exception: ", failure), failure
    assert jvm.com.streamlake.glue.BulkDelete.delete(conf, "", 4) == ""


def test_chunks_keep_a_small_partitions_deletes_in_steps_and_a_large_ones_few():
    assert [_bulk_chunk_size(n) for n in (1, 4, 8, 9, 16, 2000, 10_000)] == [1, 1, 1, 2, 2, 250, 250]


def test_progress_moves_a_chunk_at_a_time_so_a_kill_between_chunks_leaves_the_rest(spark, tmp_path):
    """What compaction's `delete:n` kill relies on: when the n-th on_deleted runs, no later chunk has been deleted."""
    fs = HadoopStorage(spark)
    paths = _files(tmp_path / "part", 16)  # chunks of 2

    class Killed(Exception):
        pass

    seen = []

    def kill_at_third(path: str) -> None:
        seen.append(path)
        if len(seen) == 3:
            raise Killed

    with pytest.raises(Killed):
        fs.delete_files(paths, threads=4, on_deleted=kill_at_third)
    assert [Path(p).exists() for p in paths] == [False] * 4 + [True] * 12


def test_the_way_files_are_deleted_is_logged_once(spark, tmp_path, caplog, monkeypatch):
    monkeypatch.setattr(storage_module, "_LOGGED", set())
    with caplog.at_level("INFO", logger="glue_jobs.lake.storage"):
        for _ in range(2):
            HadoopStorage(spark).delete_files(_files(tmp_path / "p", 2))
    assert [r.getMessage() for r in caplog.records] == [
        f"deleting files with {BULK_DELETE_CLASS}: one JVM call per chunk of up to 250 paths"]
