"""File operations through the Hadoop FileSystem API of the Spark session (DESIGN invariant 3).

The same calls reach S3 in Glue (s3:// through EMRFS/S3A) and the local filesystem in tests
(file:// or a plain path), so what the tests exercise is what runs in production.

Note on S3: a "rename" there is copy + delete and is not atomic for directories; the jobs only rely
on single-file operations plus their own journals/markers for correctness, never on directory renames.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit


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

    def _path(self, path: str):
        return self._jvm.org.apache.hadoop.fs.Path(path)

    def _fs(self, path: str):
        return self._path(path).getFileSystem(self._conf)

    def qualify(self, path: str) -> str:
        """Fully qualified form (file:/..., s3://bucket/...) so paths compare equal wherever they came from."""
        p = self._path(path)
        return str(p.getFileSystem(self._conf).makeQualified(p))

    def exists(self, path: str) -> bool:
        return bool(self._fs(path).exists(self._path(path)))

    def list(self, path: str, *, include_hidden: bool = False) -> list[FileInfo]:
        """Direct children of a directory, sorted by name; [] when it does not exist."""
        fs = self._fs(path)
        p = self._path(path)
        if not fs.exists(p):
            return []
        out = []
        for status in fs.listStatus(p):
            name = status.getPath().getName()
            if not include_hidden and is_hidden(name):
                continue
            out.append(
                FileInfo(
                    path=str(status.getPath()),
                    name=name,
                    size=int(status.getLen()),
                    modified_ms=int(status.getModificationTime()),
                    is_dir=bool(status.isDirectory()),
                )
            )
        return sorted(out, key=lambda f: f.name)

    def list_files(self, path: str, *, suffix: str = "") -> list[FileInfo]:
        """Visible data files directly under a directory (no subdirectories, no hidden names)."""
        return [f for f in self.list(path) if not f.is_dir and f.name.endswith(suffix)]

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
            chunks = []
            buf = self._jvm.java.io.ByteArrayOutputStream()
            self._jvm.org.apache.hadoop.io.IOUtils.copyBytes(stream, buf, 65536, False)
            chunks.append(bytes(buf.toByteArray()))
            return b"".join(chunks).decode("utf-8")
        finally:
            stream.close()

    def delete_files(self, paths, *, threads: int = 8, on_deleted=None) -> int:
        """Delete many single files (never directories), `threads` at a time; returns how many existed.

        Each delete is one request on S3 (and one py4j round trip everywhere), so a partition of
        thousands of small files is deleted concurrently; py4j gives every Python thread its own
        connection. `on_deleted(path)` is called after each file that was deleted.
        """
        paths = list(paths)
        if not paths:
            return 0
        fs = self._fs(paths[0])

        def delete_one(path: str) -> bool:
            deleted = bool(fs.delete(self._path(path), False))
            if deleted and on_deleted is not None:
                on_deleted(path)
            return deleted

        return sum(_concurrently(delete_one, paths, threads=threads, name="delete"))

    def rename_files(self, moves, *, threads: int = 8) -> None:
        """Move many single files, (src, dst) pairs, `threads` at a time (one request per move on S3): each
        target directory is created, an existing target refused (FileExistsError, never overwritten), a
        failed move raised (OSError). The file system is looked up once per scheme and
        authority and each target directory created once: four py4j round trips a move instead of ten
        (100 moves: 0.35 s -> 0.1 s locally). Raises the first failure once all moves are done."""
        moves = list(moves)
        path_class = self._jvm.org.apache.hadoop.fs.Path
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

    _STATUS_TEXT = re.compile(
        r"\{path=(?P<path>.+); isDirectory=(?P<dir>true|false)(?:; length=(?P<len>\d+))?.*?; modification_time=(?P<mtime>\d+)"
    )
    # The same fields, entry after entry, in the text of a whole FileStatus[] (ArrayUtils.toString).
    _STATUS_TEXTS = re.compile(
        r"\{path=(?P<path>[^;]+?); isDirectory=(?P<dir>true|false)(?:; length=(?P<len>\d+))?.*?; modification_time=(?P<mtime>\d+)"
    )

    def list_quick(self, path: str, *, include_hidden: bool = False) -> list[FileInfo]:
        """Same result as list(), for directories of thousands of files.

        list() makes six py4j round trips per entry (path, name, length, time, kind). This reads them all
        from one string, the text of the whole FileStatus[] ("{...{path=...; isDirectory=...; length=...;
        ...; modification_time=...},...}"): a few round trips per directory. It falls back to one
        FileStatus.toString() per entry when that text cannot be split unambiguously (a path containing
        ";", a format it does not know), and to the attribute calls for any such entry.
        """
        fs = self._fs(path)
        p = self._path(path)
        if not fs.exists(p):
            return []
        return self._file_infos(fs.listStatus(p), include_hidden=include_hidden)

    def glob(self, pattern: str) -> list[FileInfo]:
        """Entries matching a Hadoop glob (e.g. "<dir>/*/*/*.parquet"), sorted by path, in one listing call
        and one string (as list_quick); entries with a hidden name at any level below the pattern's first
        wildcard are left out."""
        pattern = self.qualify(pattern)  # results come qualified (file:/..., s3://bucket/...)
        statuses = self._fs(pattern).globStatus(self._path(pattern))
        if statuses is None:  # the pattern has no wildcard and names nothing
            return []
        fixed_depth = urlsplit(pattern[: pattern.find("*") if "*" in pattern else len(pattern)]).path.count("/")
        infos = self._file_infos(statuses, include_hidden=True)
        visible = [
            info for info in infos
            if not any(is_hidden(part) for part in urlsplit(info.path).path.split("/")[fixed_depth:])
        ]
        return sorted(visible, key=lambda f: f.path)

    def _file_infos(self, statuses, *, include_hidden: bool) -> list[FileInfo]:
        # ArrayUtils.toString(Object) (commons-lang3, on Spark's classpath): py4j cannot pass a FileStatus[]
        # where java.util.Arrays expects Object[].
        text = str(self._jvm.org.apache.commons.lang3.ArrayUtils.toString(statuses))
        matches = list(self._STATUS_TEXTS.finditer(text))
        # Exact only if every entry shows each marker once: a file name holding "{path=" or "; isDirectory="
        # could otherwise shift or forge fields (a name holding ";" cannot match and changes the count).
        if len(matches) == len(statuses) == text.count("{path=") == text.count("; isDirectory="):
            # Directories print no length (getLen() can still be non-zero): those few are asked for.
            entries = [(m.group("path"), m.group("dir") == "true", int(m.group("len")), int(m.group("mtime")))
                       if m.group("len") is not None else self._status_entry(statuses[i])
                       for i, m in enumerate(matches)]
        else:
            entries = [self._status_entry(status) for status in statuses]
        out = []
        for full, is_dir, size, modified in entries:
            name = full.rstrip("/").rsplit("/", 1)[-1]
            if not include_hidden and is_hidden(name):
                continue
            out.append(FileInfo(path=full, name=name, size=size, modified_ms=modified, is_dir=is_dir))
        return sorted(out, key=lambda f: f.name)

    def _status_entry(self, status):
        match = self._STATUS_TEXT.search(status.toString())
        if match is None or "; " in match.group("path") or match.group("len") is None:
            return (str(status.getPath()), bool(status.isDirectory()), int(status.getLen()),
                    int(status.getModificationTime()))
        return (match.group("path"), match.group("dir") == "true", int(match.group("len")), int(match.group("mtime")))


def _concurrently(fn, items: list, *, threads: int, name: str) -> list:
    """[fn(item) for item in items], `threads` at a time (in order; a single item or thread runs inline).
    Raises the first failure after every call has finished."""
    from concurrent.futures import ThreadPoolExecutor

    if threads <= 1 or len(items) <= 1:
        return [fn(item) for item in items]
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix=name) as pool:
        futures = [pool.submit(fn, item) for item in items]
    return [future.result() for future in futures]
