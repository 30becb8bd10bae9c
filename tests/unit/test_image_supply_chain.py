"""The image's supply chain (issue 15, item 5), read from the files: requirements.lock pins the
runtime set with hashes and nothing of the development set; the Dockerfile installs only that
lock with ``--require-hashes``, starts from a base image pinned by digest and carries the OCI
label set. tests/integration/test_packaging.py installs the lock and serves from it."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _pins(path: Path) -> dict[str, str]:
    """name -> version of every ``name==version`` line (names normalised as PEP 503 does)."""
    pins = {}
    for line in path.read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9._-]+)==([^\s;\\]+)", line)
        if match:
            pins[re.sub(r"[-_.]+", "-", match.group(1)).lower()] = match.group(2)
    return pins


def _lock_entries() -> list[tuple[str, list[str]]]:
    """(requirement line, its hashes) of every entry of requirements.lock."""
    entries: list[tuple[str, list[str]]] = []
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        if re.match(r"^[A-Za-z0-9]", line):
            entries.append((line.rstrip(" \\"), []))
        elif "--hash=" in line:
            entries[-1][1].append(line.split("--hash=", 1)[1].rstrip(" \\"))
    return entries


def test_the_lock_pins_the_runtime_set_with_hashes_and_no_dev_tool() -> None:
    lock = _pins(ROOT / "requirements.lock")
    runtime = {**_pins(ROOT / "requirements.txt"), **_pins(ROOT / "requirements-nodeps.txt")}
    assert runtime and all(lock.get(name) == version for name, version in runtime.items()), \
        {n: (v, lock.get(n)) for n, v in runtime.items() if lock.get(n) != v}
    entries = _lock_entries()
    assert len(entries) >= len(runtime)
    for requirement, hashes in entries:
        assert hashes and all(re.fullmatch(r"sha256:[0-9a-f]{64}", h) for h in hashes), requirement
    # Declared by the tests that import it and also a runtime dep: pyyaml (huggingface-hub).
    dev_only = set(_pins(ROOT / "requirements-dev.txt")) - {"pyyaml"}
    assert not dev_only & set(lock), sorted(dev_only & set(lock))


def test_the_dockerfile_installs_the_lock_from_a_digest_pinned_base_with_oci_labels() -> None:
    text = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^ARG PYTHON_IMAGE=python:3\.11-slim@sha256:[0-9a-f]{64}$", text, re.MULTILINE)
    assert all(line.strip() in ("FROM ${PYTHON_IMAGE} AS build", "FROM ${PYTHON_IMAGE}")
               for line in text.splitlines() if line.startswith("FROM"))
    assert "pip install --no-deps --require-hashes -r requirements.lock" in text
    assert "requirements-dev" not in text.replace("(requirements-dev.txt)", "")
    labels = set(re.findall(r"org\.opencontainers\.image\.([a-z.]+)=", text))
    assert {"title", "description", "version", "revision", "created", "source", "url", "documentation",
            "vendor", "licenses", "base.name"} <= labels
