"""glue_jobs.lake.storage on the local filesystem through the Hadoop API (the same calls reach S3 in Glue)."""

from __future__ import annotations

import pytest

from glue_jobs.lake.status_text import REPLY_BYTES, parse_status, parse_status_array, parse_status_lines, status_lines
from glue_jobs.lake.storage import BULK_RENAME_CLASS, STATUS_LINES_CLASS, FileInfo, HadoopStorage, is_hidden


def test_list_write_read_rename_delete(spark, tmp_path):
    fs = HadoopStorage(spark)
    root = str(tmp_path / "part")
    fs.write_text(f"{root}/a.parquet", "x" * 10)
    fs.write_text(f"{root}/_journal.json", '{"state": "staged"}')
    fs.mkdirs(f"{root}/.staging")
    assert [(f.name, f.size, f.is_dir) for f in fs.list(root, files_only=True)] == [("a.parquet", 10, False)]
    assert {f.name for f in fs.list(root, include_hidden=True)} == {"a.parquet", "_journal.json", ".staging"}
    assert fs.read_text(f"{root}/_journal.json") == '{"state": "staged"}'
    fs.rename(f"{root}/a.parquet", f"{root}/.staging/a.parquet")
    assert fs.list(root, files_only=True) == [] and fs.exists(f"{root}/.staging/a.parquet")
    fs.write_text(f"{root}/b.parquet", "y")
    with pytest.raises(FileExistsError):
        fs.rename(f"{root}/b.parquet", f"{root}/.staging/a.parquet")
    assert fs.delete(f"{root}/.staging", recursive=True) is True
    assert fs.delete(f"{root}/.staging", recursive=True) is False
    assert fs.list(str(tmp_path / "missing")) == []
    assert fs.qualify(root) == f"file:{root}"


@pytest.mark.parametrize("way", ["bulk", "per_move"])
def test_rename_files_creates_each_target_directory_and_never_overwrites(spark, tmp_path, way):
    """Both ways: the JVM's BulkRename (jvm/glue-functions, on the test session's classpath) and the py4j call per
    move taken without it."""
    fs = HadoopStorage(spark)
    if way == "per_move":
        fs._classes[BULK_RENAME_CLASS] = None  # as without the jar on the classpath
    else:
        assert fs._bulk_class(BULK_RENAME_CLASS, "moving files", "", "") is not None, "build/jvm/glue-functions.jar"
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
    assert [f.name for f in fs.list(str(staged), files_only=True)] == ["d.parquet"]
    # A missing source fails too (Hadoop's local file system raises rather than returning false), after the other
    # moves of the list are done.
    fs.write_text(str(staged / "e.parquet"), "e")
    with pytest.raises(OSError if way == "bulk" else Exception, match="missing.parquet"):
        fs.rename_files([(str(staged / "missing.parquet"), str(tmp_path / "lake/h=3/x.parquet")),
                         (str(staged / "e.parquet"), str(tmp_path / "lake/h=3/e.parquet"))])
    assert fs.read_text(str(tmp_path / "lake/h=3/e.parquet")) == "e"
    fs.rename_files([])  # nothing to move: nothing done, no call


def test_the_jvm_rename_reports_each_move_in_one_string(spark, tmp_path):
    """BulkRename's answer: a character per move (R renamed, E target exists, F failed), then a line per problem."""
    fs = HadoopStorage(spark)
    bulk = fs._bulk_class(BULK_RENAME_CLASS, "moving files", "", "")
    fs.write_text(str(tmp_path / "s/a"), "a")
    fs.write_text(str(tmp_path / "t/taken"), "t")
    fs.write_text(str(tmp_path / "s/b"), "b")
    moves = [(tmp_path / "s/a", tmp_path / "t/x/a"), (tmp_path / "s/b", tmp_path / "t/taken"), (tmp_path / "s/none", tmp_path / "t/n")]
    answer = str(bulk.rename(fs._conf, "\n".join(f"{s}\t{d}" for s, d in moves), 2)).split("\n")
    assert answer[0] == "REF"
    assert answer[1] == f"1\trefusing to overwrite {tmp_path}/t/taken"
    assert answer[2].startswith("2\trename ") and "java.io.FileNotFoundException" in answer[2]
    assert len(answer) == 3
    with pytest.raises(Exception, match="is not"):
        bulk.rename(fs._conf, "no tab here", 1)


def test_a_glob_lists_visible_matches_at_the_pattern_depth(spark, tmp_path):
    fs = HadoopStorage(spark)
    for rel in ("d=1/h=0/a.parquet", "d=1/h=0/b.parquet", "d=1/h=2/c.parquet", "d=2/h=1/e.parquet",
                "d=1/_temporary/x.parquet", "_d=3/h=0/y.parquet", "d=1/h=0/_z.parquet", "d=1/h=0/w.txt",
                "d=1/shallow.parquet"):
        fs.write_text(str(tmp_path / "root" / rel), "x")
    found = fs.list(str(tmp_path / "root") + "/*/*/*.parquet")
    assert [f.path.split("/root/")[1] for f in found] == ["d=1/h=0/a.parquet", "d=1/h=0/b.parquet", "d=1/h=2/c.parquet",
                                                         "d=2/h=1/e.parquet"]
    assert all(f.size == 1 and not f.is_dir and f.path.startswith("file:") for f in found)
    # The hidden part above the first wildcard is the caller's (a staging directory is hidden on purpose).
    fs.write_text(str(tmp_path / "_staging/batch=0/h=1/f.parquet"), "x")
    assert [f.name for f in fs.list(str(tmp_path / "_staging/batch=0") + "/*/*.parquet")] == ["f.parquet"]
    assert fs.list(str(tmp_path / "missing") + "/*/*.parquet") == []
    # include_hidden, files_only and suffix mean the same for a glob as for a directory.
    assert [f.path.split("/root/")[1] for f in fs.list(str(tmp_path / "root") + "/d=1/*", include_hidden=True)] == [
        "d=1/_temporary", "d=1/h=0", "d=1/h=2", "d=1/shallow.parquet"]
    assert [f.name for f in fs.list(str(tmp_path / "root") + "/d=1/*", files_only=True)] == ["shallow.parquet"]
    assert [f.name for f in fs.list(str(tmp_path / "root") + "/d=1/h=0/*", suffix=".txt")] == ["w.txt"]
    assert [f.name for f in fs.list(str(tmp_path / "root") + "/d=?/h=[01]/{a,e}.parquet")] == ["a.parquet", "e.parquet"]


def _listed_one_attribute_at_a_time(spark, path: str, *, include_hidden: bool) -> list[FileInfo]:
    """The oracle: a directory listed without the bulk read, each entry's fields through their own py4j calls."""
    p = spark.sparkContext._jvm.org.apache.hadoop.fs.Path(path)
    fs = p.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    if not fs.exists(p):
        return []
    infos = [FileInfo(path=str(s.getPath()), name=s.getPath().getName(), size=int(s.getLen()),
                      modified_ms=int(s.getModificationTime()), is_dir=bool(s.isDirectory())) for s in fs.listStatus(p)]
    return sorted((i for i in infos if include_hidden or not is_hidden(i.name)), key=lambda i: i.path)


def test_listing_matches_the_attributes_read_one_by_one(spark, tmp_path):
    fs = HadoopStorage(spark)
    partition = str(tmp_path / "event_hour=5")
    spark.range(0, 6, numPartitions=2).write.parquet(partition)  # part files, their .crc files and _SUCCESS
    (tmp_path / "event_hour=5/_staging").mkdir()
    (tmp_path / "event_hour=5/notes; isDirectory=true.txt").write_text("odd name")
    for include_hidden in (False, True):
        listed = fs.list(partition, include_hidden=include_hidden)
        assert listed == _listed_one_attribute_at_a_time(spark, partition, include_hidden=include_hidden)
    assert fs.list(str(tmp_path / "missing")) == []


@pytest.mark.parametrize("status_lines", [True, False], ids=["StatusLines", "statuses' own text"])
def test_listing_of_plain_names_directories_and_odd_names_matches_the_attributes(spark, tmp_path, status_lines):
    """Each way a listing's statuses are read (jvm/glue-functions' StatusLines, or without that jar the statuses' own
    text) gives what each status's attributes say, names that could confuse a reader included."""
    fs = HadoopStorage(spark)
    if not status_lines:
        fs._classes[STATUS_LINES_CLASS] = None  # as without the jar
    for i in range(5):
        (tmp_path / f"part-{i}.snappy.parquet").write_bytes(b"x" * i)
    (tmp_path / "event_hour=3").mkdir()
    (tmp_path / "_journal").mkdir()
    listed = fs.list(str(tmp_path), include_hidden=True)
    assert listed == _listed_one_attribute_at_a_time(spark, str(tmp_path), include_hidden=True)
    assert [(f.name, f.size, f.is_dir) for f in listed] == [
        ("_journal", listed[0].size, True), ("event_hour=3", listed[1].size, True),
        *((f"part-{i}.snappy.parquet", i, False) for i in range(5))]
    (tmp_path / "a;b.parquet").write_text("semicolon")  # the joined text is then ambiguous: per-entry text
    assert fs.list(str(tmp_path)) == _listed_one_attribute_at_a_time(spark, str(tmp_path), include_hidden=False)
    (tmp_path / "a;b.parquet").unlink()
    # A name that spells out other fields must not be read as them.
    (tmp_path / "x; isDirectory=false; length=5; modification_time=9.parquet").write_text("forged")
    assert fs.list(str(tmp_path)) == _listed_one_attribute_at_a_time(spark, str(tmp_path), include_hidden=False)
    (tmp_path / "tab\there.parquet").write_text("a tab")  # kept whole: the path is the line's last field
    (tmp_path / "new\nline.parquet").write_text("a newline")  # adds a line: that listing is read another way
    (tmp_path / "F\t1\t2\tfile:\nforged.parquet").write_text("a line's fields in a name")
    assert fs.list(str(tmp_path)) == _listed_one_attribute_at_a_time(spark, str(tmp_path), include_hidden=False)
    assert (fs._classes[STATUS_LINES_CLASS] is not None) == status_lines  # the tests' sessions load the jar


# ---- the bulk status read, on the text Hadoop prints (no file system) -------------------------------

_DIRECTORY = ("DeprecatedRawLocalFileStatus{path=file:/lake/event_hour=3; isDirectory=true; "
              "modification_time=1795483598132; access_time=1795483598132; owner=; group=; permission=rwxrwxrwx; "
              "isSymlink=false; hasAcl=false; isEncrypted=false; isErasureCoded=false}")


def _file_status(path: str, length: int = 5, mtime: int = 1795483598132) -> str:
    return (f"DeprecatedRawLocalFileStatus{{path={path}; isDirectory=false; length={length}; replication=1; "
            f"blocksize=33554432; modification_time={mtime}; access_time={mtime}; owner=; group=; "
            "permission=rw-rw-rw-; isSymlink=false; hasAcl=false; isEncrypted=false; isErasureCoded=false}")


def _array(*statuses: str) -> str:
    return "{" + ",".join(statuses) + "}"  # commons-lang3 ArrayUtils.toString


def test_the_status_array_text_gives_each_files_fields_and_leaves_directories_to_their_attributes():
    text = _array(_DIRECTORY, _file_status("file:/lake/a.parquet"), _file_status("s3://bucket/lake/b c.parquet", 7, 9))
    assert parse_status_array(text, 3) == [
        None, ("file:/lake/a.parquet", False, 5, 1795483598132), ("s3://bucket/lake/b c.parquet", False, 7, 9)]
    assert parse_status_array("{}", 0) == []


@pytest.mark.parametrize("odd_name", ["a;b.parquet", "x; isDirectory=false; length=5; modification_time=9.parquet",
                                      "{path=file:/elsewhere.parquet", "y; length=99.parquet"])
def test_a_status_array_with_an_ambiguous_name_is_not_read_at_all(odd_name):
    text = _array(_file_status("file:/lake/a.parquet"), _file_status(f"file:/lake/{odd_name}"))
    assert parse_status_array(text, 2) is None


def test_status_lines_give_each_entrys_fields_or_nothing_when_not_exactly_one_line_each():
    text = "D\t0\t9\tfile:/lake/event_hour=3\nF\t5\t1795483598132\tfile:/lake/a\tb.parquet\n"
    assert parse_status_lines(text, 2) == [("file:/lake/event_hour=3", True, 0, 9),
                                           ("file:/lake/a\tb.parquet", False, 5, 1795483598132)]
    assert parse_status_lines("", 0) == []
    assert parse_status_lines("F\t5\t9\tfile:/lake/new\nline.parquet\n", 1) is None  # a newline in a path
    assert parse_status_lines(text, 3) is None and parse_status_lines(text.rstrip("\n"), 2) is None
    for odd in ("X\t5\t9\tfile:/a\n", "F\t-5\t9\tfile:/a\n", "F\t5\t9\t\n", "F\t5\tfile:/a\n", "F\t5\t9\tfile:/a\n\n"):
        assert parse_status_lines(odd, 1) is None, repr(odd)


def test_a_listing_longer_than_one_reply_is_read_in_replies_under_the_budget(spark, tmp_path):
    """py4j sends a reply over 8,192 characters in two writes, the second held back until the first is acknowledged
    (jvm/glue-functions StatusLines): a long listing comes in several replies, each under REPLY_BYTES, and reads as the
    attributes say."""
    fs = HadoopStorage(spark)
    for i in range(300):
        (tmp_path / f"part-{i:05d}-{'é' * 20}-{'x' * 60}.snappy.parquet").write_bytes(b"x" * i)
    real, replies = fs._bulk_class(STATUS_LINES_CLASS, "", "", ""), []

    class Spy:
        def describe(self, statuses, start, budget):
            reply = str(real.describe(statuses, start, budget))
            replies.append(len(reply.encode()) + reply.count("\n") + reply.count("\\"))  # as py4j escapes it
            return reply

    fs._classes[STATUS_LINES_CLASS] = Spy()
    assert fs.list(str(tmp_path)) == _listed_one_attribute_at_a_time(spark, str(tmp_path), include_hidden=False)
    assert len(replies) > 5 and max(replies) <= REPLY_BYTES


def test_status_line_replies_are_read_in_turn_and_not_at_all_when_one_does_not_read():
    lines = [f"F\t{i}\t9\tfile:/lake/{i}.parquet\n" for i in range(5)]

    def replies(size):
        return lambda start: f"{len(lines[start:start + size])}\n" + "".join(lines[start:start + size])

    assert status_lines(replies(2), 5) == [(f"file:/lake/{i}.parquet", False, i, 9) for i in range(5)]
    assert status_lines(replies(9), 0) == []
    assert status_lines(lambda start: "0\n", 5) is None  # no progress: not read, rather than asked forever
    assert status_lines(lambda start: "x\n" + lines[start], 5) is None
    assert status_lines(replies(9), 3) is None  # more statuses than the listing has


def test_a_status_array_of_another_length_than_expected_is_not_read():
    assert parse_status_array(_array(_file_status("file:/lake/a.parquet")), 2) is None
    assert parse_status_array("FileStatus[2]", 2) is None  # a format it does not know


def test_one_status_text_is_read_unless_its_path_could_hide_a_field():
    assert parse_status(_file_status("file:/lake/a;b.parquet")) == ("file:/lake/a;b.parquet", False, 5, 1795483598132)
    # A subclass may print more after the fields (as S3A's status does): the fields are still found.
    assert parse_status(_file_status("s3a://b/k.parquet", 3, 4) + " isEmptyDirectory=FALSE eTag=e versionId=null") == (
        "s3a://b/k.parquet", False, 3, 4)
    assert parse_status(_file_status("file:/lake/x; isDirectory=false; length=5; modification_time=9.parquet")) is None
    assert parse_status(_DIRECTORY) is None  # no length: read from the attributes
    assert parse_status("FileStatus@1a2b") is None


def test_hidden_names_follow_spark_and_athena():
    assert is_hidden("_SUCCESS") and is_hidden(".staging") and not is_hidden("part-0.parquet")
