"""File operations through the Hadoop FileSystem API of the Spark session (DESIGN invariant 3).

The same calls reach S3 in Glue (s3:// through EMRFS/S3A) and the local filesystem in tests
(file:// or a plain path), so what the tests exercise is what runs in production.

Note on S3: a "rename" there is copy + delete and is not atomic for directories; the jobs only rely
on single-file operations plus their own journals/markers for correctness, never on directory renames.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from glue_jobs.lake.status_text import REPLY_BYTES, parse_status, parse_status_array, status_lines

log = logging.getLogger(__name__)

# jvm/glue-functions (infra/jvm_functions.py): deletes a chunk of paths with a few JVM threads in one py4j call. At
# most BULK_DELETE_CHUNK paths a call, and at least BULK_DELETE_MIN_CHUNKS calls when there are more paths: callers'
# progress (on_deleted) moves a chunk at a time, so a small partition's deletes still happen in steps.
BULK_DELETE_CLASS, BULK_DELETE_CHUNK, BULK_DELETE_MIN_CHUNKS = "com.streamlake.glue.BulkDelete", 250, 8
# Classes of jvm/glue-functions: moves (a batch's publish, compaction's) in one JVM call; a listing's statuses as text,
# in replies py4j sends in one write (docs/performance.md, "Listing a batch's staged files").
BULK_RENAME_CLASS, STATUS_LINES_CLASS = "com.streamlake.glue.BulkRename", "com.streamlake.glue.StatusLines"
_LOGGED: set[str] = set()


@dataclass(frozen=True)
class FileInfo:
    path: str
    name: str
    size: int
    modified_ms: int
    is_dir: bool


def is_hidden(name: str) -> bool:
    """Spark and Athena skip names starting with '_' or '.': staging, journals, checkpoints live there."""
    return name.startswith(("_", "."))


class HadoopStorage:
    """Thin wrapper over org.apache.hadoop.fs.FileSystem for one Spark session."""

    def __init__(self, spark) -> None:
        self._spark = spark
        self._jvm = spark.sparkContext._jvm
        self._conf = spark.sparkContext._jsc.hadoopConfiguration()
        # Looked up once: py4j resolves `jvm.org.apache.hadoop.fs.Path` with a reflection round trip on every
        # access, so a cached class saves one round trip per path (docs/performance.md has the figures).
        self._path_class = self._jvm.org.apache.hadoop.fs.Path
        self._classes: dict[str, object] = {}  # jvm/glue-functions classes looked up (_bulk_class), None when absent

    def _path(self, path: str):
        return self._path_class(path)

    def _fs(self, path: str):
        return self._path(path).getFileSystem(self._conf)

    def qualify(self, path: str) -> str:
        """Fully qualified form (file:/..., s3://bucket/...) so paths compare equal wherever they came from."""
        p = self._path(path)
        return str(p.getFileSystem(self._conf).makeQualified(p))

    def exists(self, path: str) -> bool:
        return bool(self._fs(path).exists(self._path(path)))

    def size(self, path: str) -> tuple[int, int]:
        """(bytes, files) under `path`, recursively and in one call (FileSystem.getContentSummary), hidden ones too."""
        summary = self._fs(path).getContentSummary(self._path(path))
        return int(summary.getLength()), int(summary.getFileCount())

    def list(self, path: str, *, include_hidden: bool = False, files_only: bool = False,
             suffix: str = "") -> list[FileInfo]:
        """What `path` names, sorted by path: the direct children of a directory ([] when it does not exist),
        or, when `path` holds a Hadoop glob wildcard (* ? [ {, e.g. "<dir>/*/*/*.parquet"), every entry
        matching it ([] when none). Paths come qualified (file:/..., s3://bucket/...).

        Hidden names ("_", "."; is_hidden) are left out unless include_hidden: for a directory its hidden
        children, for a glob any entry with a hidden name at a level below the first wildcard (what is
        above is the caller's: a staging directory is hidden on purpose). files_only leaves out
        directories; suffix keeps only names ending with it.

        One listing call and one bulk read of the statuses per listing, whatever the number of entries
        (see glue_jobs/lake/status_text.py): thousands of files cost a few py4j round trips, not several per file.
        """
        if _GLOB_CHARACTERS.search(path) is None:
            fs, p = self._fs(path), self._path(path)
            statuses = fs.listStatus(p) if fs.exists(p) else []
            fixed_depth = None
        else:
            pattern = self.qualify(path)
            statuses = self._fs(pattern).globStatus(self._path(pattern)) or []  # None: a literal naming nothing
            fixed_depth = urlsplit(pattern[:_GLOB_CHARACTERS.search(pattern).start()]).path.count("/")
        found = [
            info for info in self._file_infos(statuses)
            if (include_hidden or not _hidden_below(info, fixed_depth))
            and not (files_only and info.is_dir) and info.name.endswith(suffix)
        ]
        return sorted(found, key=lambda f: f.path)

    def mkdirs(self, path: str) -> None:
        self._fs(path).mkdirs(self._path(path))

    def delete(self, path: str, *, recursive: bool = False) -> bool:
        fs = self._fs(path)
        p = self._path(path)
        if not fs.exists(p):
            return False
        return bool(fs.delete(p, recursive))

    def rename(self, src: str, dst: str) -> None:
        """Move one file; raises if the target exists or the move fails (never overwrites)."""
        self.rename_files([(src, dst)], threads=1)

    def write_text(self, path: str, text: str) -> None:
        """Write a small file whole (overwrite), e.g. a journal or a marker."""
        fs = self._fs(path)
        stream = fs.create(self._path(path), True)
        try:
            stream.write(bytearray(text.encode("utf-8")))
        finally:
            stream.close()

    def read_text(self, path: str) -> str:
        fs = self._fs(path)
        stream = fs.open(self._path(path))
        try:
            buf = self._jvm.java.io.ByteArrayOutputStream()
            self._jvm.org.apache.hadoop.io.IOUtils.copyBytes(stream, buf, 65536, False)
            return bytes(buf.toByteArray()).decode("utf-8")
        finally:
            stream.close()

    def delete_files(self, paths, *, threads: int = 8, on_deleted=None) -> int:
        """Delete many single files, never recursively, `threads` at a time (one request each on S3); returns how
        many existed. With the JVM functions on the classpath (BULK_DELETE_CLASS: --extra-jars on Glue, spark.jars
        locally) a chunk of paths is one py4j call, else each path is one (py4j gives each Python thread its own
        connection). `on_deleted(path)` is called for each file deleted, after its chunk, in order: a kill between
        two chunks lands with some inputs deleted and some not. With the bulk class, a path that cannot be deleted
        (e.g. a non-empty directory) raises OSError once every other path was tried."""
        paths = list(paths)
        if not paths:
            return 0
        bulk = self._bulk_delete
        if bulk is None or any("\n" in path for path in paths):
            return self._delete_each(paths, threads=threads, on_deleted=on_deleted)
        deleted, failures = 0, []
        size = _bulk_chunk_size(len(paths))
        for start in range(0, len(paths), size):
            chunk = paths[start:start + size]
            codes, *errors = str(bulk.delete(self._conf, "\n".join(chunk), threads)).split("\n")
            for path, code in zip(chunk, codes, strict=True):
                if code == "D":
                    deleted += 1
                    if on_deleted is not None:
                        on_deleted(path)
            failures += [f"{chunk[int(index)]}: {message}" for index, _, message in (e.partition("\t") for e in errors)]
        if failures:
            raise OSError(f"could not delete {len(failures)} of {len(paths)} file(s), e.g. {failures[0]}")
        return deleted

    @property
    def _bulk_delete(self):
        return self._bulk_class(BULK_DELETE_CLASS, "deleting files", f"one JVM call per chunk of up to {BULK_DELETE_CHUNK} paths",
                                "one py4j call per path")

    def _bulk_class(self, name: str, doing: str, with_class: str, without: str):
        """The JVM class `name` of jvm/glue-functions (--extra-jars on Glue, spark.jars locally), None without its jar;
        the way taken is logged once per process."""
        if name not in self._classes:
            from py4j.java_gateway import JavaClass

            found = self._jvm
            for part in name.split("."):
                found = getattr(found, part)
            self._classes[name] = found if isinstance(found, JavaClass) else None
            way = f"{doing} with {name}: {with_class}" if self._classes[name] is not None else (
                f"{doing} with {without} ({name} is not on the classpath: jvm/glue-functions jar)")
            if way not in _LOGGED:
                _LOGGED.add(way)
                log.info("%s", way)
        return self._classes[name]

    def _delete_each(self, paths: list[str], *, threads: int, on_deleted) -> int:
        fs = self._fs(paths[0])

        def delete_one(path: str) -> bool:
            deleted = bool(fs.delete(self._path(path), False))
            if deleted and on_deleted is not None:
                on_deleted(path)
            return deleted

        return sum(_concurrently(delete_one, paths, threads=threads, name="delete"))

    def rename_files(self, moves, *, threads: int = 8) -> None:
        """Move many single files, (src, dst) pairs, `threads` at a time (one request per move on S3): each
        target directory is created once, an existing target refused (FileExistsError, never overwritten), a
        failed move raised (OSError). With the JVM functions on the classpath (BULK_RENAME_CLASS) the whole list
        is one py4j call; else each move is four round trips (the file system looked up once per scheme and
        authority). Raises the first failure, in the order given, once all moves are done."""
        moves = list(moves)
        if not moves:
            return
        bulk = self._bulk_class(BULK_RENAME_CLASS, "moving files", "one JVM call per list of moves", "four py4j calls per move")
        if bulk is None or any(_unsafe_in_lines(path) for move in moves for path in move):
            self._rename_each(moves, threads=threads)
            return
        codes, *errors = str(bulk.rename(self._conf, "\n".join(f"{src}\t{dst}" for src, dst in moves), threads)).split("\n")
        if len(codes) != len(moves) or set(codes) - {"R", "E", "F"}:
            raise AssertionError(f"{BULK_RENAME_CLASS} answered {codes[:40]!r} for {len(moves)} move(s)")
        messages = {int(index): message for index, _, message in (e.partition("\t") for e in errors)}
        for index, code in enumerate(codes):
            if code == "E":
                raise FileExistsError(messages.get(index, f"refusing to overwrite {moves[index][1]}"))
            if code == "F":
                raise OSError(messages.get(index, f"rename {moves[index][0]} -> {moves[index][1]} failed"))

    def _rename_each(self, moves: list[tuple[str, str]], *, threads: int) -> None:
        path_class = self._path_class
        filesystems: dict[tuple[str, str], object] = {}

        def filesystem(path: str):
            parsed = urlsplit(path)
            key = (parsed.scheme, parsed.netloc)
            if key not in filesystems:
                filesystems[key] = path_class(path).getFileSystem(self._conf)
            return filesystems[key]

        for _, dst in moves:
            filesystem(dst)  # every lookup before the threads start: they only read the dict
        parents = sorted({dst.rstrip("/").rsplit("/", 1)[0] for _, dst in moves})
        _concurrently(lambda parent: filesystem(parent).mkdirs(path_class(parent)), parents, threads=threads, name="mkdirs")

        def move(pair) -> None:
            src, dst = pair
            fs, dst_path = filesystem(dst), path_class(dst)
            if fs.exists(dst_path):
                raise FileExistsError(f"refusing to overwrite {dst}")
            if not fs.rename(path_class(src), dst_path):
                raise OSError(f"rename {src} -> {dst} failed")

        _concurrently(move, moves, threads=threads, name="rename")

    def _file_infos(self, statuses) -> list[FileInfo]:
        """FileInfo of each FileStatus: from StatusLines' text (jvm/glue-functions), else the array's own text, else each
        status's own text, else its attributes (so a directory, whose own text has no length: getLen() need not be 0)."""
        if not (count := len(statuses)):
            return []
        lines = self._bulk_class(STATUS_LINES_CLASS, "reading listings", "four fields a status", "FileStatus.toString")
        parsed = None if lines is None else status_lines(lambda start: str(lines.describe(statuses, start, REPLY_BYTES)), count)
        if parsed is None:  # ArrayUtils.toString(Object), commons-lang3: py4j cannot pass a FileStatus[] as Object[]
            parsed = parse_status_array(str(self._jvm.org.apache.commons.lang3.ArrayUtils.toString(statuses)), count)
        if parsed is None:
            parsed = [parse_status(str(status.toString())) for status in statuses]
        out = []
        for i, entry in enumerate(parsed):
            if entry is None:
                status = statuses[i]
                entry = (str(status.getPath()), bool(status.isDirectory()), int(status.getLen()),
                         int(status.getModificationTime()))
            full, is_dir, size, modified = entry
            out.append(FileInfo(path=full, name=full.rstrip("/").rsplit("/", 1)[-1], size=size, modified_ms=modified, is_dir=is_dir))
        return out


# A path with one of these is a Hadoop glob (GlobPattern); a literal path lists a directory.
_GLOB_CHARACTERS = re.compile(r"[*?\[{]")

def _hidden_below(info: FileInfo, fixed_depth: int | None) -> bool:
    """Whether a listed entry has a hidden name below what the caller named: the entry's own name in a
    directory (fixed_depth None), any level below the first wildcard of a glob."""
    levels = [info.name] if fixed_depth is None else urlsplit(info.path).path.split("/")[fixed_depth:]
    return any(is_hidden(level) for level in levels)


def _unsafe_in_lines(path: str) -> bool:
    """Whether `path` cannot travel in BulkRename's "<source>\\t<target>" lines."""
    return "\n" in path or "\t" in path


def _bulk_chunk_size(count: int) -> int:
    """Paths per bulk call: 2,000 paths go in 8 calls of 250, 4 paths in 4 calls of one."""
    return max(1, min(BULK_DELETE_CHUNK, -(-count // BULK_DELETE_MIN_CHUNKS)))


def _concurrently(fn, items: list, *, threads: int, name: str) -> list:
    """[fn(item) for item in items], `threads` at a time (in order; a single item or thread runs inline).
    Raises the first failure after every call has finished."""
    from concurrent.futures import ThreadPoolExecutor

    if threads <= 1 or len(items) <= 1:
        return [fn(item) for item in items]
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix=name) as pool:
        futures = [pool.submit(fn, item) for item in items]
    return [future.result() for future in futures]
