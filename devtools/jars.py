"""JVM jars from Maven Central, pinned by version and SHA-256 (`make bootstrap` fetches them).

    python -m devtools.jars fetch [SET ...]     # what jvm/jars.lock lists -> build/jars/<set>/, each checked
    python -m devtools.jars resolve SET [...]   # maintainers: resolve SET's roots with Maven, rewrite its lock lines
    python -m devtools.jars classpath SET       # the set's jars, ':'-separated (fetched first)

A set is a classpath for one purpose (SETS: its root artifacts, and the pyspark whose jars it leaves out). `resolve` asks Maven for the roots and their
runtime dependencies once and writes every jar, with its SHA-256, into jvm/jars.lock; `fetch` then needs no
Maven: it downloads each locked jar from Maven Central and refuses one whose SHA-256 differs from the lock's.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
LOCK = REPO_ROOT / "jvm" / "jars.lock"
JARS_DIR = REPO_ROOT / "build" / "jars"
CENTRAL = "https://repo1.maven.org/maven2"
DEPENDENCY_PLUGIN = "3.8.1"  # maven-dependency-plugin, for `resolve` only

# The Kafka line the config deploys (infra/config/model.py MSK_KAFKA_VERSIONS: 3.7.x-3.9.x); its broker runs
# from kafka_2.13 and its runtime dependencies with `java -cp` (the release tarball is not on Maven Central).
KAFKA_VERSION = "3.9.1"


@dataclass(frozen=True)
class JarSet:
    roots: tuple[str, ...]
    # A virtualenv whose pyspark/jars already hold some dependencies: those are left out of the set, so the
    # classpath never carries two versions of one library (Spark's own win, as on Glue).
    provided_by: str | None = None


SETS: dict[str, JarSet] = {
    # The release's libs/ add a logging binding the POM leaves out: slf4j-reload4j (with reload4j), as 3.9 ships it.
    "kafka-broker": JarSet((f"org.apache.kafka:kafka_2.13:{KAFKA_VERSION}", "org.slf4j:slf4j-reload4j:1.7.36")),
    # Spark's Kafka source and Avro functions for each Spark line the tests run (the pyspark pins of
    # requirements-dev.txt, requirements-spark33.txt, requirements-spark41.txt).
    # Maven Central does not serve spark-sql-kafka-0-10_2.12:3.5.4 (HTTP 404 on 2026-11-25; 3.5.3 and 3.5.7 are
    # served): the 3.5 line's Kafka source is 3.5.3's, the real connector of the same minor line on Spark 3.5.4.
    "spark-3.5": JarSet(("org.apache.spark:spark-sql-kafka-0-10_2.12:3.5.3", "org.apache.spark:spark-avro_2.12:3.5.4"), ".venv"),
    "spark-3.3": JarSet(("org.apache.spark:spark-sql-kafka-0-10_2.12:3.3.4", "org.apache.spark:spark-avro_2.12:3.3.4"),
                        ".venv-spark33"),
    "spark-4.1": JarSet(("org.apache.spark:spark-sql-kafka-0-10_2.13:4.1.1", "org.apache.spark:spark-avro_2.13:4.1.1"),
                        ".venv-spark41"),
}
# AWS's own Schema Registry serializer (awslabs/aws-glue-schema-registry), with its Avro dependency: the tests
# check that frames it writes decode as the project's producer's do (tests/spark/test_aws_serde_frames.py).
SETS["glue-serde"] = JarSet(("software.amazon.glue:schema-registry-serde:1.1.24", "org.slf4j:slf4j-simple:1.7.36"))
# Apache Iceberg's Spark runtime as Glue 5.0 ships it (Spark 3.5.4; Glue's "Using the Iceberg framework in AWS Glue"
# table: 5.0 -> Iceberg 1.7.1, 4.0 -> 1.0.0, 5.1 -> 1.10.0), and SQLite's JDBC driver for the local JDBC catalog
# that Spark writes and pyiceberg's SQL catalog reads (docs/iceberg.md). The runtime jar is shaded: no dependencies.
SETS["iceberg-3.5"] = JarSet(("org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:1.7.1", "org.xerial:sqlite-jdbc:3.54.1.0"),
                             ".venv")
# The Glue 4.0 line (Spark 3.3) ships Iceberg 1.0.0 (the same table). The Glue 6.0 line (Spark 4.1): that table, as
# stored on 2026-11-25, stops at 5.1; 1.11.0 is the first Iceberg release with a Spark 4.1 runtime
# (iceberg-spark-runtime-4.1_2.13 on Maven Central lists 1.11.0 and 1.12.0), which issue 35 names for Glue 6.0:
# unverified against a Glue page.
SETS["iceberg-3.3"] = JarSet(("org.apache.iceberg:iceberg-spark-runtime-3.3_2.12:1.0.0", "org.xerial:sqlite-jdbc:3.54.1.0"),
                             ".venv-spark33")
SETS["iceberg-4.1"] = JarSet(("org.apache.iceberg:iceberg-spark-runtime-4.1_2.13:1.11.0", "org.xerial:sqlite-jdbc:3.54.1.0"),
                             ".venv-spark41")
ROOTS = {name: jar_set.roots for name, jar_set in SETS.items()}
_JAR_NAME = re.compile(r"^(?P<artifact>.+?)-(?P<version>\d.*)\.jar$")


def provided_artifacts(venv: Path) -> set[str]:
    """The artifact names of the jars a virtualenv's pyspark ships (pyspark/jars/<artifact>-<version>.jar)."""
    found = {match["artifact"] for path in venv.glob("lib/python*/site-packages/pyspark/jars/*.jar")
             if (match := _JAR_NAME.match(path.name))}
    if not found:
        raise ValueError(f"no pyspark jars under {venv}: run make bootstrap first")
    return found


@dataclass(frozen=True)
class LockedJar:
    set: str
    coordinate: str  # group:artifact:version[:classifier]
    sha256: str

    @property
    def file_name(self) -> str:
        group, artifact, version, *classifier = self.coordinate.split(":")
        return f"{artifact}-{version}{'-' + classifier[0] if classifier else ''}.jar"

    def url(self, repository: str = CENTRAL) -> str:
        group, artifact, version, *_ = self.coordinate.split(":")
        return f"{repository}/{group.replace('.', '/')}/{artifact}/{version}/{self.file_name}"


def read_lock(path: Path = LOCK) -> list[LockedJar]:
    jars = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split()
        if len(fields) != 3 or len(fields[2]) != 64 or fields[1].count(":") not in (2, 3):
            raise ValueError(f"{path}:{number}: expected '<set> <group:artifact:version[:classifier]> <sha256>', got {line!r}")
        jars.append(LockedJar(*fields))
    return jars


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for chunk in iter(lambda: stream.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def fetch(sets: list[str] | None = None, *, lock: Path = LOCK, target: Path = JARS_DIR, repository: str = CENTRAL,
          log=print) -> dict[str, list[Path]]:
    """Every locked jar of `sets` (default: all) in target/<set>/, downloaded where missing or different, each
    checked against its SHA-256; a set's directory holds exactly its locked jars afterwards."""
    jars = read_lock(lock)
    known = sorted({jar.set for jar in jars})
    unknown = sorted(set(sets or ()) - set(known))
    if unknown:
        raise ValueError(f"no jar set {', '.join(unknown)} in {lock}; locked sets: {', '.join(known)}")
    paths: dict[str, list[Path]] = {}
    for name in sets or known:
        directory = target / name
        directory.mkdir(parents=True, exist_ok=True)
        wanted = [jar for jar in jars if jar.set == name]
        fetched = 0
        for jar in wanted:
            path = directory / jar.file_name
            if path.exists() and sha256(path) == jar.sha256:
                continue
            with tempfile.NamedTemporaryFile(dir=directory, prefix=".download-", delete=False) as partial:
                with urllib.request.urlopen(jar.url(repository), timeout=120) as response:  # noqa: S310 (a fixed https URL)
                    shutil.copyfileobj(response, partial)
            actual = sha256(Path(partial.name))
            if actual != jar.sha256:
                os.unlink(partial.name)
                raise RuntimeError(f"{jar.url(repository)}: SHA-256 {actual}, but {lock.name} pins {jar.sha256} for {jar.coordinate}; "
                                   "nothing was installed")
            os.replace(partial.name, path)
            fetched += 1
        for stray in set(directory.glob("*.jar")) - {directory / jar.file_name for jar in wanted}:
            stray.unlink()  # a jar of an earlier lock
        paths[name] = sorted(directory / jar.file_name for jar in wanted)
        log(f"jars {name}: {len(wanted)} locked, {fetched} downloaded, all SHA-256 checked ({directory})")
    return paths


def classpath(name: str) -> str:
    return os.pathsep.join(str(p) for p in fetch([name], log=lambda _: None)[name])


def resolve(name: str, *, lock: Path = LOCK) -> list[LockedJar]:
    """Resolve ROOTS[name] and their runtime dependencies with Maven (maintainers only); rewrite the set's lines."""
    if name not in SETS:
        raise ValueError(f"unknown jar set {name}; sets: {', '.join(sorted(SETS))}")
    provided = provided_artifacts(REPO_ROOT / SETS[name].provided_by) if SETS[name].provided_by else set()
    with tempfile.TemporaryDirectory(prefix="jars-resolve-") as work:
        dependencies = "".join(
            "<dependency><groupId>{}</groupId><artifactId>{}</artifactId><version>{}</version></dependency>".format(
                *root.split(":")) for root in ROOTS[name])
        (Path(work) / "pom.xml").write_text(
            '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
            f"<groupId>streamlake</groupId><artifactId>jars-{name}</artifactId><version>0</version>"
            f"<dependencies>{dependencies}</dependencies></project>")
        listing = Path(work) / "list.txt"
        plugin = f"org.apache.maven.plugins:maven-dependency-plugin:{DEPENDENCY_PLUGIN}"
        subprocess.run(["mvn", "-q", "-B", f"{plugin}:copy-dependencies", f"{plugin}:list", "-DincludeScope=runtime",
                        f"-DoutputDirectory={work}/jars", f"-DoutputFile={listing}", "-DexcludeTransitive=false"],
                       cwd=work, check=True)
        locked = []
        for line in listing.read_text().splitlines():
            if not line.strip():
                continue
            parts = line.split()[0].split(":")  # group:artifact:type[:classifier]:version:scope [-- module ...]
            if len(parts) < 5 or parts[2] != "jar":
                continue
            group, artifact, _, *rest = parts
            version, classifier = (rest[1], rest[0]) if len(rest) == 4 else (rest[0], None)
            if artifact in provided:
                continue
            coordinate = f"{group}:{artifact}:{version}" + (f":{classifier}" if classifier else "")
            jar = LockedJar(name, coordinate, "0" * 64)
            locked.append(LockedJar(name, coordinate, sha256(Path(work) / "jars" / jar.file_name)))
    others = [jar for jar in read_lock(lock) if jar.set != name] if lock.exists() else []
    header = "# Written by `python -m devtools.jars resolve`; `make bootstrap` fetches these and checks each SHA-256.\n"
    lines = [f"{jar.set} {jar.coordinate} {jar.sha256}" for jar in sorted([*others, *locked], key=lambda j: (j.set, j.coordinate))]
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text(header + "\n".join(lines) + "\n")
    return locked


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devtools.jars", description=__doc__.splitlines()[0],
                                     allow_abbrev=False)
    commands = parser.add_subparsers(dest="command", required=True, metavar="command", help="what to do")
    commands.add_parser("fetch", help="download and check the locked jars", allow_abbrev=False).add_argument(
        "sets", nargs="*", help="the jar sets of jvm/jars.lock to fetch (default: every set)")
    commands.add_parser("resolve", help="maintainers: re-resolve sets with Maven", allow_abbrev=False).add_argument(
        "sets", nargs="+", help="the jar sets whose lock lines to rewrite")
    commands.add_parser("classpath", help="print a set's classpath", allow_abbrev=False).add_argument(
        "set", help="the jar set whose jars to print, ':'-separated")
    args = parser.parse_args(argv)
    try:
        if args.command == "fetch":
            fetch(args.sets or None)
        elif args.command == "resolve":
            for name in args.sets:
                print(f"{name}: {len(resolve(name))} jars locked in {LOCK}")
        else:
            print(classpath(args.set))
    except (ValueError, RuntimeError, OSError, subprocess.CalledProcessError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
