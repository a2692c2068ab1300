"""glue_jobs.storage on the local filesystem through the Hadoop API (the same calls reach S3 in Glue)."""

from __future__ import annotations

import pytest

from glue_jobs.storage import HadoopStorage, is_hidden


def test_list_write_read_rename_delete(spark, tmp_path):
    fs = HadoopStorage(spark)
    root = str(tmp_path / "part")
    fs.write_text(f"{root}/a.parquet", "x" * 10)
    fs.write_text(f"{root}/_journal.json", '{"state": "staged"}')
    fs.mkdirs(f"{root}/.staging")
    assert [(f.name, f.size, f.is_dir) for f in fs.list_files(root)] == [("a.parquet", 10, False)]
    assert {f.name for f in fs.list(root, include_hidden=True)} == {"a.parquet", "_journal.json", ".staging"}
    assert fs.read_text(f"{root}/_journal.json") == '{"state": "staged"}'
    fs.rename(f"{root}/a.parquet", f"{root}/.staging/a.parquet")
    assert fs.list_files(root) == [] and fs.exists(f"{root}/.staging/a.parquet")
    fs.write_text(f"{root}/b.parquet", "y")
    with pytest.raises(FileExistsError):
        fs.rename(f"{root}/b.parquet", f"{root}/.staging/a.parquet")
    assert fs.delete(f"{root}/.staging", recursive=True) is True
    assert fs.delete(f"{root}/.staging", recursive=True) is False
    assert fs.list(str(tmp_path / "missing")) == []
    assert fs.qualify(root) == f"file:{root}"


def test_rename_files_creates_each_target_directory_and_never_overwrites(spark, tmp_path):
    fs = HadoopStorage(spark)
    staged = tmp_path / "staged"
    for name in ("a", "b", "c", "d"):
        fs.write_text(str(staged / f"{name}.parquet"), name)
    fs.write_text(str(tmp_path / "lake/h=1/taken.parquet"), "earlier")
    moves = [
        (fs.qualify(str(staged / "a.parquet")), str(tmp_path / "lake/h=1/a.parquet")),  # qualified source
        (str(staged / "b.parquet"), str(tmp_path / "lake/h=1/b.parquet")),
        (str(staged / "c.parquet"), str(tmp_path / "lake/h=2/deep/c.parquet")),
        (str(staged / "d.parquet"), str(tmp_path / "lake/h=1/taken.parquet")),
    ]
    with pytest.raises(FileExistsError, match="taken.parquet"):
        fs.rename_files(moves, threads=3)
    # The other moves are done before the failure is raised; the existing file is untouched.
    assert fs.read_text(str(tmp_path / "lake/h=1/a.parquet")) == "a"
    assert fs.read_text(str(tmp_path / "lake/h=1/b.parquet")) == "b"
    assert fs.read_text(str(tmp_path / "lake/h=2/deep/c.parquet")) == "c"
    assert fs.read_text(str(tmp_path / "lake/h=1/taken.parquet")) == "earlier"
    assert [f.name for f in fs.list_files(str(staged))] == ["d.parquet"]
    # A missing source fails too (Hadoop's local file system raises rather than returning false).
    with pytest.raises(Exception, match="missing.parquet"):
        fs.rename_files([(str(staged / "missing.parquet"), str(tmp_path / "lake/h=3/x.parquet"))])


def test_glob_lists_visible_matches_at_the_pattern_depth(spark, tmp_path):
    fs = HadoopStorage(spark)
    for rel in ("d=1/h=0/a.parquet", "d=1/h=0/b.parquet", "d=1/h=2/c.parquet", "d=2/h=1/e.parquet",
                "d=1/_temporary/x.parquet", "_d=3/h=0/y.parquet", "d=1/h=0/_z.parquet", "d=1/h=0/w.txt",
                "d=1/shallow.parquet"):
        fs.write_text(str(tmp_path / "root" / rel), "x")
    found = fs.glob(str(tmp_path / "root") + "/*/*/*.parquet")
    assert [f.path.split("/root/")[1] for f in found] == ["d=1/h=0/a.parquet", "d=1/h=0/b.parquet", "d=1/h=2/c.parquet",
                                                         "d=2/h=1/e.parquet"]
    assert all(f.size == 1 and not f.is_dir and f.path.startswith("file:") for f in found)
    # The hidden part above the first wildcard is the caller's (a staging directory is hidden on purpose).
    fs.write_text(str(tmp_path / "_staging/batch=0/h=1/f.parquet"), "x")
    assert [f.name for f in fs.glob(str(tmp_path / "_staging/batch=0") + "/*/*.parquet")] == ["f.parquet"]
    assert fs.glob(str(tmp_path / "missing") + "/*/*.parquet") == []


def test_hidden_names_follow_spark_and_athena():
    assert is_hidden("_SUCCESS") and is_hidden(".staging") and not is_hidden("part-0.parquet")
