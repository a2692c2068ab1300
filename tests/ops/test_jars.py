"""make bootstrap's JVM jars (devtools/jars.py): pinned in jvm/jars.lock, each checked by SHA-256."""

from __future__ import annotations

import hashlib

import pytest

from devtools import jars


def _repository(tmp_path, coordinate: str, content: bytes) -> str:
    group, artifact, version = coordinate.split(":")
    directory = tmp_path / "central" / group.replace(".", "/") / artifact / version
    directory.mkdir(parents=True)
    (directory / f"{artifact}-{version}.jar").write_bytes(content)
    return (tmp_path / "central").as_uri()


def _lock(tmp_path, *lines: str):
    lock = tmp_path / "jars.lock"
    lock.write_text("# comment\n" + "\n".join(lines) + "\n")
    return lock


def test_fetch_installs_the_locked_jar_and_removes_jars_no_longer_locked(tmp_path):
    content = b"PK jar bytes"
    repository = _repository(tmp_path, "org.example:lib:1.2.3", content)
    lock = _lock(tmp_path, f"broker org.example:lib:1.2.3 {hashlib.sha256(content).hexdigest()}")
    stale = tmp_path / "jars" / "broker" / "lib-1.0.0.jar"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"old")

    paths = jars.fetch(lock=lock, target=tmp_path / "jars", repository=repository, log=lambda _: None)

    assert paths == {"broker": [tmp_path / "jars" / "broker" / "lib-1.2.3.jar"]}
    assert paths["broker"][0].read_bytes() == content
    assert not stale.exists()


def test_a_jar_whose_sha256_differs_from_the_lock_is_refused_and_not_installed(tmp_path):
    repository = _repository(tmp_path, "org.example:lib:1.2.3", b"tampered")
    lock = _lock(tmp_path, f"broker org.example:lib:1.2.3 {'a' * 64}")

    with pytest.raises(RuntimeError, match=r"lib-1\.2\.3\.jar: SHA-256 [0-9a-f]{64}, but jars.lock pins a{64}"):
        jars.fetch(lock=lock, target=tmp_path / "jars", repository=repository, log=lambda _: None)
    assert not list((tmp_path / "jars" / "broker").iterdir())


def test_unknown_set_and_bad_lock_lines_are_named(tmp_path):
    lock = _lock(tmp_path, f"broker org.example:lib:1.2.3 {'a' * 64}")
    with pytest.raises(ValueError, match="no jar set nope in .*; locked sets: broker"):
        jars.fetch(["nope"], lock=lock, target=tmp_path / "jars", log=lambda _: None)
    with pytest.raises(ValueError, match=r"jars.lock:2: expected '<set> <group:artifact:version\[:classifier\]> <sha256>'"):
        jars.read_lock(_lock(tmp_path, "broker org.example:lib:1.2.3 short"))


def test_the_committed_lock_pins_every_root_of_every_set():
    locked = jars.read_lock()
    for name, roots in jars.ROOTS.items():
        coordinates = {jar.coordinate for jar in locked if jar.set == name}
        assert set(roots) <= coordinates, f"{name}: run `python -m devtools.jars resolve {name}`"
