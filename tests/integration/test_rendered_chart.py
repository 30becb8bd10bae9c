"""The chart runs what it renders (issue 15, item 1).

For each ``ci/*-values.yaml`` the chart is rendered (tests/helm.py) and every automem
container of its Deployments and StatefulSets is started as a local process with the exact
``command``/``args`` (the image's entrypoint is ``automem``, Dockerfile) and the environment
Kubernetes would give it (the ConfigMap through ``envFrom``, ``value``s, Secret keys through
``secretKeyRef``, ``$(VAR)`` expansion, ``fieldRef`` → the pod name). Only addresses are
substituted, plus what this machine does not have:

* host names and ports: NATS and FalkorDB → embedded servers the test starts; each process's
  ``PORT`` / ``AUTOMEM_GRPC_PORT`` / ``AUTOMEM_METRICS_PORT`` → a free port, ``AUTOMEM_HOST`` → 127.0.0.1, the
  ``AUTOMEM_<SERVICE>_ADDR`` targets → the port of the process running that service, the
  OTLP endpoint and ``OPENAI_BASE_URL`` → a closed loopback port (no collector, no OpenAI);
* files of Secrets the operator supplies (``grpc.tls.secretName``): the mounted
  ``tls.crt`` / ``tls.key`` / ``ca.crt`` are made at test time (tests/tls.py, SANs for the
  rendered Service names and 127.0.0.1) and the variables naming files under the mount point
  name them instead; ``AUTOMEM_GRPC_HEALTH_PORT`` → a free port;
* ``QDRANT_URL`` → ``disabled`` (every values file names a Qdrant *server*, which this
  machine does not run; recall then uses its graph arms), ``AUTOMEM_DATA_DIR`` → a temporary
  directory per process, ``FALKORDB_PASSWORD`` dropped (the embedded FalkorDB has none).

Then a memory is stored and recalled through the rendered gateway with the rendered token,
and the ``helm test`` Pod's own command runs against the gateway and must exit 0.
A flag the CLI rejects, a variable the settings refuse or a missing address makes a process
exit or the calls fail, and the test with it.
"""

from __future__ import annotations

import asyncio
import base64
import os
import re
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from automem.common.embedded import EmbeddedFalkorDB, EmbeddedNats, free_port
from tests.conftest import eventually, stop_processes
from tests.helm import CI_DIR, render, values_of
from tests.tls import TestCA

pytestmark = pytest.mark.asyncio(loop_scope="session")

CASES = sorted(p.name for p in CI_DIR.glob("*-values.yaml"))
SERVICES = ("ingest", "recall", "enrich", "consolidate")


def _secret_data(docs: list[dict[str, Any]]) -> dict[tuple[str, str], str]:
    out = {}
    for doc in docs:
        if doc["kind"] == "Secret":
            for key, value in (doc.get("data") or {}).items():
                out[(doc["metadata"]["name"], key)] = base64.b64decode(value).decode()
            for key, value in (doc.get("stringData") or {}).items():
                out[(doc["metadata"]["name"], key)] = value
    return out


def _config_maps(docs: list[dict[str, Any]]) -> dict[str, dict[str, str]]:
    return {d["metadata"]["name"]: d.get("data") or {} for d in docs if d["kind"] == "ConfigMap"}


def _environment(container: dict[str, Any], pod: str, maps: dict, secrets: dict) -> dict[str, str]:
    """The variables Kubernetes sets in ``container`` (envFrom, then env in order, with $(VAR))."""
    env: dict[str, str] = {}
    for source in container.get("envFrom") or []:
        if "configMapRef" in source:
            env.update(maps[source["configMapRef"]["name"]])
    for item in container.get("env") or []:
        if "value" in item:
            env[item["name"]] = re.sub(r"\$\(([A-Za-z0-9_]+)\)", lambda m: env.get(m.group(1), m.group(0)),
                                       str(item["value"]))
            continue
        ref = item.get("valueFrom") or {}
        if "fieldRef" in ref:
            env[item["name"]] = pod
        elif "secretKeyRef" in ref:
            key = (ref["secretKeyRef"]["name"], ref["secretKeyRef"]["key"])
            if key in secrets:
                env[item["name"]] = secrets[key]
            else:
                assert ref["secretKeyRef"].get("optional"), f"{item['name']}: Secret {key} is not rendered"
        elif "configMapKeyRef" in ref:
            env[item["name"]] = maps[ref["configMapKeyRef"]["name"]][ref["configMapKeyRef"]["key"]]
    return env


def _automem_processes(docs: list[dict[str, Any]], values: dict[str, Any]) -> list[dict[str, Any]]:
    """One entry per container of the automem image (``image.repository`` of the values):
    name, argv, environment, the targets it serves."""
    maps, secrets = _config_maps(docs), _secret_data(docs)
    repository = (values.get("image") or {}).get("repository") or "automem/automem"
    out = []
    for doc in docs:
        if doc["kind"] not in ("Deployment", "StatefulSet"):
            continue
        for container in doc["spec"]["template"]["spec"]["containers"]:
            if repository not in container["image"]:
                continue
            args = [str(a) for a in container.get("args") or []]
            argv = [str(a) for a in container.get("command") or ["automem"]] + args
            assert argv[0] == "automem", argv
            target = next((a.split("=", 1)[1] for a in args if a.startswith("--target=")), None)
            if target is None and "--target" in args:
                target = args[args.index("--target") + 1]
            targets = set(SERVICES) | {"gateway"} if target in (None, "all") else set(target.split(","))
            out.append({"name": doc["metadata"]["name"], "argv": argv, "targets": targets,
                        "env": _environment(container, f"{doc['metadata']['name']}-0", maps, secrets),
                        "secret_mounts": _secret_mounts(doc["spec"]["template"]["spec"], container, secrets)})
    return out


def _secret_mounts(pod: dict[str, Any], container: dict[str, Any], secrets: dict) -> dict[str, str]:
    """mount path -> Secret name, for the container's mounts of Secrets the chart does not render."""
    volumes = {v["name"]: v for v in pod.get("volumes") or []}
    rendered = {name for name, _ in secrets}
    out = {}
    for mount in container.get("volumeMounts") or []:
        secret = (volumes[mount["name"]].get("secret") or {}).get("secretName")
        if secret and secret not in rendered:
            out[mount["mountPath"]] = secret
    return out


def _test_pods(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ``helm test`` hook Pods: name, argv, environment."""
    maps, secrets = _config_maps(docs), _secret_data(docs)
    out = []
    for doc in docs:
        if doc["kind"] == "Pod" and (doc["metadata"].get("annotations") or {}).get("helm.sh/hook") == "test":
            (container,) = doc["spec"]["containers"]
            out.append({"name": doc["metadata"]["name"], "argv": [str(a) for a in container["command"]],
                        "env": _environment(container, doc["metadata"]["name"], maps, secrets)})
    return out


def _localise(procs: list[dict[str, Any]], nats: EmbeddedNats, falkordb: EmbeddedFalkorDB, tmp: Path,
              docs: list[dict[str, Any]]) -> None:
    """The substitutions of the module docstring, in place."""
    ca = TestCA()
    names = ["localhost", "127.0.0.1"] + [d["metadata"]["name"] for d in docs if d["kind"] == "Service"]
    made: dict[str, Path] = {}
    for proc in procs:
        for mount, secret in proc.pop("secret_mounts").items():
            if secret not in made:
                made[secret] = ca.issue(tmp / "secrets" / secret, names).cert.parent
            for name, value in list(proc["env"].items()):
                if value.startswith(mount.rstrip("/") + "/"):
                    proc["env"][name] = str(made[secret] / value[len(mount.rstrip("/")) + 1:])
        if "AUTOMEM_GRPC_HEALTH_PORT" in proc["env"]:
            proc["env"]["AUTOMEM_GRPC_HEALTH_PORT"] = str(free_port())
    for proc in procs:
        proc["grpc_port"], proc["http_port"], proc["metrics_port"] = free_port(), free_port(), free_port()
    where = {service: proc["grpc_port"] for proc in procs for service in SERVICES if service in proc["targets"]}
    closed = free_port()
    for proc in procs:
        env = proc["env"]
        assert "AUTOMEM_METRICS_PORT" in env, f"{proc['name']}: no metrics port (the ServiceMonitor scrapes it)"
        for service in SERVICES:
            name = f"AUTOMEM_{service.upper()}_ADDR"
            if name in env:
                assert service in where, f"{proc['name']}: {name} names a service no rendered process runs"
                env[name] = f"127.0.0.1:{where[service]}"
        env.update({"NATS_URL": nats.url, "FALKORDB_HOST": falkordb.host, "FALKORDB_PORT": str(falkordb.port),
                    "QDRANT_URL": "disabled", "AUTOMEM_DATA_DIR": str(tmp / proc["name"]), "AUTOMEM_HOST": "127.0.0.1",
                    "PORT": str(proc["http_port"]), "AUTOMEM_GRPC_PORT": str(proc["grpc_port"]),
                    "AUTOMEM_METRICS_PORT": str(proc["metrics_port"]), "OPENAI_BASE_URL": f"http://127.0.0.1:{closed}/v1"})
        env.pop("FALKORDB_PASSWORD", None)
        if "OTEL_EXPORTER_OTLP_ENDPOINT" in env:
            env["OTEL_EXPORTER_OTLP_ENDPOINT"] = f"http://127.0.0.1:{closed}"


def _process_env(env: dict[str, str]) -> dict[str, str]:
    """The rendered variables on top of a clean environment (no AUTOMEM_* etc. of the test run)."""
    base = {k: v for k, v in os.environ.items()
            if k in ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "HF_HUB_OFFLINE", "VIRTUAL_ENV")}
    return {**base, **env}


async def _wait_gateway(url: str, procs: list[asyncio.subprocess.Process]) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=5) as http:
        async def ready() -> bool:
            for proc in procs:
                assert proc.returncode is None, f"a rendered process exited with {proc.returncode}"
            try:
                return (await http.get("/readyz")).status_code == 200
            except httpx.HTTPError:
                return False
        await eventually(ready, timeout=180, interval=0.5)


@pytest.mark.parametrize("case", CASES)
async def test_the_rendered_chart_runs_and_serves(case: str, tmp_path: Path) -> None:
    values = values_of(case)
    docs = render(values)
    procs = _automem_processes(docs, values)
    assert procs and any("gateway" in p["targets"] for p in procs)
    # NATS and FalkorDB of this test's own: the rendered stream and graph names are used as they are.
    nats, falkordb = EmbeddedNats(tmp_path / "nats"), EmbeddedFalkorDB(tmp_path / "falkordb")
    await nats.start()
    await falkordb.start()
    _localise(procs, nats, falkordb, tmp_path, docs)
    if (values.get("grpc") or {}).get("tls", {}).get("enabled"):  # every process on TLS, with files that exist
        for proc in procs:
            assert proc["env"]["AUTOMEM_GRPC_TLS"] == "true", proc["name"]
            for name in ("AUTOMEM_GRPC_TLS_CERT_FILE", "AUTOMEM_GRPC_TLS_KEY_FILE", "AUTOMEM_GRPC_TLS_CA_FILE"):
                assert Path(proc["env"][name]).is_file(), (proc["name"], name)
    running: list[asyncio.subprocess.Process] = []
    logs: list[Path] = []
    try:
        for proc in procs:
            log = tmp_path / f"{proc['name']}.log"
            logs.append(log)
            with log.open("w") as err:
                running.append(await asyncio.create_subprocess_exec(
                    sys.executable, "-m", "automem.cli", *proc["argv"][1:], env=_process_env(proc["env"]),
                    stdout=asyncio.subprocess.DEVNULL, stderr=err))
        gateway = next(p for p in procs if "gateway" in p["targets"])
        url = f"http://127.0.0.1:{gateway['http_port']}"
        try:
            await _wait_gateway(url, running)
        except AssertionError:
            raise AssertionError("\n".join(f"--- {log.name}\n{log.read_text()[-3000:]}" for log in logs)) from None
        token = gateway["env"].get("AUTOMEM_API_TOKEN", "")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with httpx.AsyncClient(base_url=url, headers=headers, timeout=30) as http:
            r = await http.post("/memory", json={"content": f"The {case} chart stores and recalls", "tags": ["chart"]})
            assert r.status_code == 201, r.text
            memory_id = r.json()["memory_id"]
            found = await http.get("/recall", params={"tags": "chart", "limit": 5})
            assert found.status_code == 200, found.text
            assert memory_id in [hit["id"] for hit in found.json()["results"]]
            if token:
                assert (await http.get("/recall", params={"tags": "chart"},
                                       headers={"Authorization": "Bearer wrong"})).status_code == 401
        # Every process serves its own metrics (what the ServiceMonitor scrapes): its own
        # service.name, and the calls it answered.
        async with httpx.AsyncClient(timeout=10) as http:
            for proc in procs:
                page = (await http.get(f"http://127.0.0.1:{proc['metrics_port']}/metrics")).text
                assert f'service_name="{proc["env"]["OTEL_SERVICE_NAME"]}"' in page, proc["name"]
                if "gateway" in proc["targets"]:
                    assert 'http_route="/memory"' in page, proc["name"]
                if "ingest" in proc["targets"]:
                    assert 'rpc_method="automem.v1.IngestService/CreateMemory"' in page, proc["name"]
        # `helm test`: the hook Pod's own command (`python -c ...`) against the gateway.
        hooks = _test_pods(docs)
        assert hooks or values.get("tests", {}).get("enabled") is False
        for hook in hooks:
            assert hook["argv"][0] == "python", hook["argv"]
            env = {**hook["env"], "AUTOMEM_URL": url}
            done = await asyncio.create_subprocess_exec(sys.executable, *hook["argv"][1:], env=_process_env(env),
                                                        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
            output = (await done.communicate())[0].decode(errors="replace")
            assert done.returncode == 0, f"helm test {hook['name']} failed:\n{output}"
            assert "stored, recalled and deleted" in output, output
        for proc, handle in zip(procs, running, strict=True):
            assert handle.returncode is None, f"{proc['name']} exited with {handle.returncode}"
    finally:
        await stop_processes(running)
        await nats.stop()
        await falkordb.stop()
