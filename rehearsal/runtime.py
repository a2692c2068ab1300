"""The job process's runtime: a Spark line (a virtualenv's pyspark), the modules Glue provides, and the
stand-in jar for what is JVM-side in Glue.

The job process imports from exactly: the script's folder, the package zip, and one runtime folder of
links to the packages below. Glue provides them in its Python runtime: pyspark and py4j with Spark,
`awsglue` (AWS's own library, AWSGlueDataplanePython; 5.1.0 is the only release that installs on
Python 3.11, so it stands for every Glue version here), and boto3 with its dependencies (the page
"Using Python libraries with AWS Glue" lists boto3 among the modules each Glue version already provides,
https://docs.aws.amazon.com/glue/latest/dg/aws-glue-programming-python-libraries.html; the versions
here are this project's pins, not Glue's).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

STANDIN_SOURCES = Path(__file__).resolve().parent / "standin"
# S3 is stood in by local folders (run.LocalS3); their file system is the local sessions' one, which sets permissions
# without starting a `chmod` process per file (glue_jobs/session.py FORKLESS_LOCAL_FS), compiled into the stand-in jar
# from its one source so the job's own --extra-jars stay the only copy of the functions it ships.
FORKLESS_LOCAL_FS_SOURCE = (Path(__file__).resolve().parent.parent / "jvm" / "glue-functions" / "src" / "com" / "streamlake"
                            / "glue" / "ForklessLocalFileSystem.java")
# Iceberg's GlueCatalog and S3FileIO stood in (for jobs with `--datalake-formats iceberg`), compiled against the line's
# Iceberg runtime as well: a jar of their own, next to the line's runtime on the job's classpath.
ICEBERG_STANDIN_SOURCES = Path(__file__).resolve().parent / "standin_iceberg"
RUNTIME_MODULES = ("pyspark", "py4j", "awsglue", "boto3", "botocore", "jmespath", "s3transfer", "dateutil", "six",
                   "urllib3")


@dataclass(frozen=True)
class SparkLine:
    """A Python whose site-packages hold one pyspark line and the runtime modules."""

    python: Path
    pyspark_version: str
    modules: dict[str, Path]  # module name -> package folder or module file

    @property
    def spark_line(self) -> str:
        return ".".join(self.pyspark_version.split(".")[:2])

    @property
    def jars(self) -> Path:
        return self.modules["pyspark"] / "jars"


def spark_line(python: str | Path) -> SparkLine:
    """Inspect a virtualenv's Python (it is not imported into this process)."""
    probe = (
        "import importlib, json, os, pyspark\n"
        f"names = {RUNTIME_MODULES!r}\n"
        "paths = {}\n"
        "for n in names:\n"
        "    m = importlib.import_module(n)\n"
        "    f = m.__file__\n"
        "    paths[n] = os.path.dirname(f) if f.endswith('__init__.py') else f\n"
        "print(json.dumps({'version': pyspark.__version__, 'paths': paths}))\n"
    )
    done = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"{python} lacks a Glue runtime module (pyspark, awsglue, boto3 ...): {done.stderr[-800:]}")
    info = json.loads(done.stdout)
    return SparkLine(Path(os.path.abspath(python)), info["version"], {k: Path(v) for k, v in info["paths"].items()})


def runtime_folder(line: SparkLine, build_dir: Path) -> Path:
    """A folder holding links to exactly the runtime modules of `line` (nothing else of its site-packages)."""
    folder = build_dir / f"runtime-{line.pyspark_version}"
    folder.mkdir(parents=True, exist_ok=True)
    for path in line.modules.values():
        link = folder / path.name
        if link.is_symlink() and link.resolve() == path.resolve():
            continue
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(path)
    return folder


def standin_jar(line: SparkLine, build_dir: Path) -> Path:
    """The stand-in classes compiled with this machine's JDK against the line's Spark jars (no Maven);
    rebuilt when a source changes."""
    return _compile("glue-standin", STANDIN_SOURCES, [f"{line.jars}/*"], line, build_dir, extra=(FORKLESS_LOCAL_FS_SOURCE,))


def iceberg_jars(line: SparkLine) -> list[Path]:
    """The line's Iceberg runtime and SQLite's JDBC driver (build/jars/iceberg-<line>/, `make bootstrap`): what
    `--datalake-formats iceberg` adds on Glue, plus the driver of the stood-in catalog."""
    from devtools.jars import JARS_DIR

    found = sorted((JARS_DIR / f"iceberg-{line.spark_line}").glob("*.jar"))
    if not found:
        raise RuntimeError(f"no Iceberg runtime in {JARS_DIR / f'iceberg-{line.spark_line}'}: run make bootstrap")
    return found


def iceberg_standin_jar(line: SparkLine, build_dir: Path) -> Path:
    """GlueCatalog and S3FileIO stood in (rehearsal/standin_iceberg/), compiled against the line's Spark jars, its
    Iceberg runtime and the stand-in jar."""
    classpath = [f"{line.jars}/*", *map(str, iceberg_jars(line)), str(standin_jar(line, build_dir))]
    return _compile("glue-standin-iceberg", ICEBERG_STANDIN_SOURCES, classpath, line, build_dir)


def _compile(name: str, root: Path, classpath: list[str], line: SparkLine, build_dir: Path, extra: tuple[Path, ...] = ()) -> Path:
    sources = sorted(root.rglob("*.java")) + list(extra)
    digest = hashlib.sha256()
    for source in sources:
        digest.update((source.relative_to(root).as_posix() if source.is_relative_to(root) else source.name).encode()
                      + b"\0" + source.read_bytes())
    for entry in classpath[1:]:
        digest.update(entry.encode() + b"\0")
    jar = build_dir / f"{name}-{line.pyspark_version}-{digest.hexdigest()[:12]}.jar"
    if jar.exists():
        return jar
    classes = build_dir / f"classes-{name}-{line.pyspark_version}"
    shutil.rmtree(classes, ignore_errors=True)
    classes.mkdir(parents=True)
    compiled = subprocess.run(
        ["javac", "-nowarn", "-d", str(classes), "-cp", os.pathsep.join(classpath), *map(str, sources)],
        capture_output=True, text=True, timeout=300,
    )
    if compiled.returncode != 0:
        raise RuntimeError(f"javac failed for {name}:\n{compiled.stderr[-3000:]}")
    tmp = jar.with_suffix(".tmp")
    subprocess.run(["jar", "cf", str(tmp), "-C", str(classes), "."], check=True, timeout=120)
    tmp.replace(jar)
    return jar
