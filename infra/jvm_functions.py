"""The project's own JVM functions (jvm/glue-functions/src): compiled for Java 8 into one jar the Kafka and compaction jobs ship.

    python -m infra.jvm_functions build      # -> build/jvm/glue-functions-<digest>.jar (+ CURRENT_JAR), its path printed

The jar holds com.streamlake.glue.RegistryFrameDecoder (docs/kafka.md "Decoding in the job"), which the Kafka job
registers as a Spark function, com.streamlake.glue.BulkDelete, the compaction's input deletes in one JVM call per
chunk (glue_jobs/lake/storage.py HadoopStorage.delete_files), and com.streamlake.glue.RankInRuns, the compaction's
survivors without a window operator (compaction/transforms.py survivors_in_runs), among others (jvm/glue-functions/src);
AWS Glue loads the jar from `--extra-jars`. It is compiled with `javac --release 8` (Glue 4.0 runs Java 8; later Glue
versions run newer JVMs that load Java 8 classes) against the Spark, Avro and Hadoop client jars of the default
pyspark: it uses Spark's Java UDF and Java RDD APIs (org.apache.spark.sql.api.java.UDF1, Row, RowFactory, JavaRDD,
InternalRow), Avro's generic reader, Hadoop's FileSystem API (FileSystem, Path, Configuration) and parquet-mr's footer
reader (ParquetFileReader, its metadata and statistics classes, 1.12 on Spark 3.3), present on every
Spark line; the few Spark internals RankInRuns needs are looked up by name at run time (its class doc).

The jar is reproducible for identical class files: sorted entries, a fixed time, no compression. Its name
carries the digest of the sources and the compiler's version, so a source change or another JDK gives another
file (and another CDK asset), and an unchanged tree builds nothing. Each build also copies the jar to
CURRENT_JAR, the one local Spark sessions load (glue_jobs/session.connector_jars).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
SOURCES = REPO_ROOT / "jvm" / "glue-functions" / "src"
TARGET_DIR = REPO_ROOT / "build" / "jvm"
CURRENT_JAR = TARGET_DIR / "glue-functions.jar"
_FIXED_TIME = (1980, 1, 1, 0, 0, 0)
# What javac needs from Spark's jars; every Spark line has these artifacts (the API moved to spark-sql-api in 4.x).
_COMPILE_JARS = ("spark-sql_", "spark-sql-api_", "spark-catalyst_", "spark-core_", "spark-unsafe_", "spark-common-utils_",
                 "kryo-shaded-", "avro-1", "scala-library-", "hadoop-client-api-", "jackson-core-", "parquet-hadoop-",
                 "parquet-column-", "parquet-common-", "parquet-format-structures-")


def _javac() -> str:
    home = os.environ.get("JAVA_HOME")
    candidate = Path(home) / "bin" / "javac" if home else None
    found = str(candidate) if candidate and candidate.exists() else shutil.which("javac")
    if not found:
        raise RuntimeError("javac not found: building the jobs' JVM functions needs a JDK 11 or later "
                           "(set JAVA_HOME or put javac on PATH)")
    return found


def _spark_jars() -> list[Path]:
    try:
        import pyspark
    except ImportError as error:
        raise RuntimeError("pyspark is not installed: the JVM functions compile against its jars (make bootstrap)") from error
    folder = Path(pyspark.__file__).parent / "jars"
    jars = sorted(p for p in folder.glob("*.jar") if p.name.startswith(_COMPILE_JARS))
    if not all(any(p.name.startswith(prefix) for p in jars) for prefix in ("avro-1", "spark-sql_", "hadoop-client-api-",
                                                                            "jackson-core-")):
        raise RuntimeError(f"{folder} lacks Spark SQL, Avro, Hadoop client or Jackson jars: {[p.name for p in jars]}")
    return jars


def source_files() -> list[Path]:
    return sorted(SOURCES.rglob("*.java"))


def _digest(javac: str) -> str:
    version = subprocess.run([javac, "-version"], capture_output=True, text=True, check=True)
    digest = hashlib.sha256((version.stdout + version.stderr).strip().encode())
    for path in source_files():
        digest.update(path.relative_to(SOURCES).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def jar_path() -> Path:
    """The jar for the current sources and compiler, built if it is not there yet."""
    javac = _javac()
    target = TARGET_DIR / f"glue-functions-{_digest(javac)}.jar"
    if not target.exists():
        _build(javac, target)
    if not CURRENT_JAR.exists() or CURRENT_JAR.read_bytes() != target.read_bytes():
        tmp = CURRENT_JAR.with_suffix(f".{os.getpid()}.tmp")
        shutil.copyfile(target, tmp)
        tmp.replace(CURRENT_JAR)
    return target


def _build(javac: str, target: Path) -> None:
    sources = source_files()
    if not sources:
        raise RuntimeError(f"no Java sources under {SOURCES}")
    TARGET_DIR.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="glue-functions-") as classes:
        command = [javac, "--release", "8", "-encoding", "UTF-8", "-nowarn", "-Xlint:-options", "-d", classes,
                   "-cp", os.pathsep.join(map(str, _spark_jars())), *map(str, sources)]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"javac failed ({done.returncode}):\n{done.stdout}{done.stderr}")
        tmp = target.with_suffix(f".{os.getpid()}.tmp")
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_STORED) as archive:
            manifest = zipfile.ZipInfo("META-INF/MANIFEST.MF", date_time=_FIXED_TIME)
            archive.writestr(manifest, "Manifest-Version: 1.0\r\nCreated-By: streamlake infra.jvm_functions\r\n\r\n")
            for path in sorted(Path(classes).rglob("*.class")):
                info = zipfile.ZipInfo(path.relative_to(classes).as_posix(), date_time=_FIXED_TIME)
                info.external_attr = 0o644 << 16
                archive.writestr(info, path.read_bytes())
        tmp.replace(target)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args != ["build"]:
        print("usage: python -m infra.jvm_functions build", file=sys.stderr)
        return 2
    print(jar_path())
    return 0


if __name__ == "__main__":
    sys.exit(main())
