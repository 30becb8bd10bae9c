"""Contract tests of the Helm chart in deploy/helm/automem.

Everything runs in-process and offline: ``helm_python`` (the Helm v4 SDK) lints and renders
the chart (= ``helm lint --strict`` / ``helm template``), and ``kubernetes_validate`` checks
every rendered manifest against the bundled Kubernetes OpenAPI schemas in strict mode
(unknown fields are errors). Each ``ci/*-values.yaml`` and the chart defaults are checked.
"""

from __future__ import annotations

import base64
import functools
import json
import re
from pathlib import Path
from typing import Any

import helm_python
import kubernetes_validate
import pytest
import yaml

from tests.helm import CHART, CI_DIR, NAMESPACE, RELEASE, render, values_of

#: Kubernetes versions the manifests must be valid for: a current one and the newest bundled.
K8S_VERSIONS = ("1.33.0", kubernetes_validate.utils.latest_version())
COMPONENTS = ("gateway", "ingest", "recall", "enrich", "consolidate")
GRPC_COMPONENTS = ("ingest", "recall", "enrich", "consolidate")
STATELESS = ("gateway", "ingest", "recall")
SECRET_KEYS = {
    "AUTOMEM_API_TOKEN",
    "ADMIN_API_TOKEN",
    "OPENAI_API_KEY",
    "FALKORDB_PASSWORD",
    "QDRANT_API_KEY",
    "NATS_TOKEN",
}
#: Kinds from CRDs that the bundled schemas cannot know.
CRD_KINDS = {"ServiceMonitor", "PrometheusRule", "HTTPRoute"}

VALUES_FILES = sorted(CI_DIR.glob("*-values.yaml"))
CASES = [pytest.param(None, id="defaults")] + [pytest.param(p.name, id=p.stem) for p in VALUES_FILES]


_values = values_of


@pytest.fixture(scope="module")
def chart() -> Any:
    loaded = helm_python.Chart.load(CHART)
    yield loaded
    loaded.close()


def _render(chart: Any, values: dict[str, Any], release: str = RELEASE) -> list[dict[str, Any]]:
    """Render ``values`` as ``release`` and return every manifest (NOTES.txt excluded) as a dict."""
    out = chart.render(values, name=release, namespace=NAMESPACE)
    docs: list[dict[str, Any]] = []
    for path, text in sorted(out.items()):
        if path.endswith("NOTES.txt"):
            continue
        docs.extend(d for d in yaml.safe_load_all(text) if d)
    return docs


@functools.cache
def _rendered_case(case: str | None) -> tuple[dict[str, Any], ...]:
    return tuple(render(_values(case)))


def _kind(docs: Any, kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def _name(component: str) -> str:
    return f"{RELEASE}-automem-{component}"


def _by_component(docs: Any, kind: str) -> dict[str, dict[str, Any]]:
    """The one ``kind`` of each component (headless Services left out: see _headless)."""
    return {d["metadata"]["labels"]["app.kubernetes.io/component"]: d for d in _kind(docs, kind)
            if not d["metadata"]["name"].endswith("-headless")}


def _pod_specs(docs: Any) -> list[tuple[str, dict[str, Any]]]:
    """(name, pod spec) of every workload and bare Pod (the helm test hook)."""
    return [
        (d["metadata"]["name"], d["spec"]["template"]["spec"] if d["kind"] != "Pod" else d["spec"])
        for d in docs
        if d["kind"] in {"Deployment", "StatefulSet", "DaemonSet", "Job", "Pod"}
    ]


def _configmap_data(docs: Any) -> dict[str, str]:
    """The settings ConfigMap (not the dashboard's)."""
    (cm,) = [d for d in _kind(docs, "ConfigMap") if d["metadata"]["name"] == f"{RELEASE}-automem"]
    return cm["data"]


# --- lint, render, validate -----------------------------------------------------------------


def test_required_ci_values_files_exist() -> None:
    names = {p.name for p in VALUES_FILES}
    assert {
        "singlebinary-values.yaml",
        "distributed-values.yaml",
        "quickstart-values.yaml",
        "existing-secret-values.yaml",
    } <= names


@pytest.mark.parametrize("case", CASES)
def test_chart_passes_strict_lint(case: str | None) -> None:
    report = helm_python.lint(CHART, _values(case), strict=True, namespace=NAMESPACE)
    problems = [m for m in report["messages"] if m["severity"] >= 2]
    assert report["errors"] == [] and problems == [], report


@pytest.mark.parametrize("case", CASES)
def test_every_manifest_is_valid_kubernetes(case: str | None) -> None:
    docs = _rendered_case(case)
    assert docs, "nothing rendered"
    for doc in docs:
        assert doc["metadata"].get("namespace") in (None, NAMESPACE)
        if doc["kind"] in CRD_KINDS:
            continue
        for version in K8S_VERSIONS:
            kubernetes_validate.validate(doc, version, strict=True)


@pytest.mark.parametrize("case", CASES)
def test_every_resource_has_app_kubernetes_io_labels(case: str | None) -> None:
    for doc in _rendered_case(case):
        labels = doc["metadata"]["labels"]
        assert labels["app.kubernetes.io/name"] == "automem"
        assert labels["app.kubernetes.io/instance"] == RELEASE
        assert labels["app.kubernetes.io/managed-by"] == "Helm"
        assert labels["app.kubernetes.io/component"]


# --- deployment modes ---------------------------------------------------------------------


def test_distributed_renders_one_deployment_per_component_with_its_target() -> None:
    docs = _rendered_case("distributed-values.yaml")
    deployments = _by_component(docs, "Deployment")
    assert set(deployments) == set(COMPONENTS)
    for component, dep in deployments.items():
        assert dep["metadata"]["name"] == _name(component)
        (container,) = dep["spec"]["template"]["spec"]["containers"]
        assert container["args"][:2] == ["serve", f"--target={component}"]
        assert dep["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"] == component
    assert deployments["recall"]["spec"]["template"]["spec"]["containers"][0]["args"][2:] == [
        "--log-format=json"
    ]
    services = _by_component(docs, "Service")
    assert set(services) == set(COMPONENTS)
    assert [p["port"] for p in services["gateway"]["spec"]["ports"]] == [8001, 9464]
    for component in GRPC_COMPONENTS:
        assert [(p["name"], p["port"]) for p in services[component]["spec"]["ports"]] == [("grpc", 50051),
                                                                                         ("metrics", 9464)]


@pytest.mark.parametrize("case", [None, "singlebinary-values.yaml", "existing-secret-values.yaml"])
def test_single_binary_renders_one_deployment_running_every_target(case: str | None) -> None:
    docs = _rendered_case(case)
    (dep,) = _kind(docs, "Deployment")
    assert dep["metadata"]["name"] == _name("single-binary")
    assert dep["spec"]["replicas"] == 1
    assert dep["spec"]["strategy"]["type"] == "Recreate"
    (container,) = dep["spec"]["template"]["spec"]["containers"]
    assert container["args"][:2] == ["serve", "--target=all"]
    assert {p["name"]: p["containerPort"] for p in container["ports"]} == {"http": 8001, "grpc": 50051,
                                                                           "metrics": 9464}
    assert "AUTOMEM_INGEST_ADDR" not in _configmap_data(docs)


def test_single_binary_persistence_mounts_a_pvc_as_data_dir() -> None:
    docs = _rendered_case("singlebinary-values.yaml")
    (pvc,) = _kind(docs, "PersistentVolumeClaim")
    assert pvc["spec"]["resources"]["requests"]["storage"] == "5Gi"
    (dep,) = _kind(docs, "Deployment")
    volumes = {v["name"]: v for v in dep["spec"]["template"]["spec"]["volumes"]}
    assert volumes["data"]["persistentVolumeClaim"]["claimName"] == pvc["metadata"]["name"]
    mounts = {
        m["name"]: m["mountPath"] for m in dep["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]
    }
    assert mounts["data"] == _configmap_data(docs)["AUTOMEM_DATA_DIR"]


def test_gateway_finds_every_grpc_service_by_address() -> None:
    # Default: client-side round_robin over a headless Service per component.
    docs = _rendered_case("distributed-values.yaml")
    data = _configmap_data(docs)
    services = {s["metadata"]["name"]: s for s in _kind(docs, "Service")}
    for component in GRPC_COMPONENTS:
        target = data[f"AUTOMEM_{component.upper()}_ADDR"]
        assert target == f"dns:///{_name(component)}-headless.{NAMESPACE}.svc.cluster.local:50051"
        headless = services[f"{_name(component)}-headless"]
        assert headless["spec"]["clusterIP"] == "None"
        assert headless["spec"]["selector"] == services[_name(component)]["spec"]["selector"]
        assert [p["port"] for p in headless["spec"]["ports"]] == [50051]
    assert data["AUTOMEM_GRPC_LB_POLICY"] == "round_robin"
    assert data["AUTOMEM_HOST"] == "0.0.0.0"
    # Off: the ClusterIP Services, pick_first, and servers that age connections out.
    plain = _render_values({**_values("distributed-values.yaml"),
                            "grpc": {"clientLoadBalancing": False, "maxConnectionAgeSeconds": 300}})
    data = _configmap_data(plain)
    assert not [s for s in _kind(plain, "Service") if s["metadata"]["name"].endswith("-headless")]
    for component in GRPC_COMPONENTS:
        assert data[f"AUTOMEM_{component.upper()}_ADDR"] == f"{_name(component)}:50051"
    assert data["AUTOMEM_GRPC_LB_POLICY"] == "pick_first"
    assert data["AUTOMEM_GRPC_MAX_CONNECTION_AGE_SECONDS"] == "300"


_render_values = render


# --- security and probes ------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES)
def test_every_container_is_non_root_with_read_only_root_filesystem(case: str | None) -> None:
    pods = _pod_specs(_rendered_case(case))
    assert pods
    for name, pod in pods:
        pod_sc = pod.get("securityContext", {})
        assert pod_sc.get("seccompProfile", {}).get("type") == "RuntimeDefault", name
        for container in pod.get("initContainers", []) + pod["containers"]:
            sc = container["securityContext"]
            assert sc["readOnlyRootFilesystem"] is True, (name, container["name"])
            assert sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot")) is True, (name, container["name"])
            assert sc["allowPrivilegeEscalation"] is False, (name, container["name"])
            assert sc["capabilities"]["drop"] == ["ALL"], (name, container["name"])


@pytest.mark.parametrize("case", CASES)
def test_automem_containers_run_as_10001_with_a_writable_tmp(case: str | None) -> None:
    for dep in _kind(_rendered_case(case), "Deployment"):
        pod = dep["spec"]["template"]["spec"]
        container = pod["containers"][0]  # the automem one; sidecars (extraContainers) follow
        assert container["securityContext"]["runAsUser"] == 10001
        assert container["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
        tmp = next(m for m in container["volumeMounts"] if m["mountPath"] == "/tmp")
        volume = next(v for v in pod["volumes"] if v["name"] == tmp["name"])
        assert "emptyDir" in volume
        assert pod["automountServiceAccountToken"] is False


def test_liveness_is_the_process_alone_and_readiness_the_components_service() -> None:
    deployments = _by_component(_rendered_case("distributed-values.yaml"), "Deployment")
    for component in GRPC_COMPONENTS:
        (container,) = deployments[component]["spec"]["template"]["spec"]["containers"]
        for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
            assert container[probe]["grpc"]["port"] == 50051
            assert "httpGet" not in container[probe]
        for probe in ("startupProbe", "livenessProbe"):
            assert container[probe]["grpc"]["service"] == "liveness"
        assert container["readinessProbe"]["grpc"]["service"] == f"automem.v1.{component.capitalize()}Service"
    (gateway,) = deployments["gateway"]["spec"]["template"]["spec"]["containers"]
    for probe in ("startupProbe", "livenessProbe"):
        assert gateway[probe]["httpGet"] == {"path": "/livez", "port": "http"}
    assert gateway["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    # /readyz answers within the probe's timeout, also when a service hangs: its own wait per
    # service is shorter (a hung service took 5 s against the probe's 3: break-it review).
    from automem.gateway.usecases import READINESS_TIMEOUT

    assert READINESS_TIMEOUT < gateway["readinessProbe"]["timeoutSeconds"], gateway["readinessProbe"]


# --- autoscaling and disruption budgets ---------------------------------------------------


@pytest.mark.parametrize("case", CASES)
def test_hpa_exists_only_when_enabled(case: str | None) -> None:
    values = _values(case)
    docs = _rendered_case(case)
    distributed = values.get("deploymentMode") == "Distributed"
    enabled = {
        c
        for c in COMPONENTS
        if distributed and values.get(c, {}).get("autoscaling", {}).get("enabled", False)
    }
    hpas = _by_component(docs, "HorizontalPodAutoscaler")
    assert set(hpas) == enabled
    deployments = _by_component(docs, "Deployment")
    for component, dep in deployments.items():
        assert ("replicas" in dep["spec"]) == (component not in enabled), component
    for component, hpa in hpas.items():
        assert hpa["apiVersion"] == "autoscaling/v2"
        assert hpa["spec"]["scaleTargetRef"] == {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "name": _name(component),
        }
        assert hpa["spec"]["metrics"], component


def test_distributed_values_turn_hpa_on_for_the_stateless_parts() -> None:
    hpas = _by_component(_rendered_case("distributed-values.yaml"), "HorizontalPodAutoscaler")
    assert set(hpas) == set(STATELESS)
    metrics = {m["resource"]["name"] for m in hpas["ingest"]["spec"]["metrics"]}
    assert metrics == {"cpu", "memory"}


def test_stateless_components_have_a_pdb_matching_their_pods() -> None:
    docs = _rendered_case("distributed-values.yaml")
    pdbs = _by_component(docs, "PodDisruptionBudget")
    assert set(STATELESS) <= set(pdbs)
    deployments = _by_component(docs, "Deployment")
    for component, pdb in pdbs.items():
        assert pdb["apiVersion"] == "policy/v1"
        pod_labels = deployments[component]["spec"]["template"]["metadata"]["labels"]
        assert pdb["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    assert pdbs["enrich"]["spec"] == {"minAvailable": 1, "selector": pdbs["enrich"]["spec"]["selector"]}
    assert pdbs["gateway"]["spec"]["maxUnavailable"] == 1


def test_consolidate_and_single_binary_cannot_scale_past_one_replica(chart: Any) -> None:
    for values in (
        {"deploymentMode": "Distributed", "consolidate": {"replicas": 2}},
        {"deploymentMode": "Distributed", "consolidate": {"autoscaling": {"enabled": True}}},
        {"singleBinary": {"replicas": 3}},
    ):
        with pytest.raises(helm_python.HelmValuesError):
            chart.render(values, name=RELEASE, namespace=NAMESPACE)


# --- config and secrets -------------------------------------------------------------------


def _secret_values(values: dict[str, Any]) -> list[str]:
    found = [
        values.get("auth", {}).get("apiToken", ""),
        values.get("auth", {}).get("adminToken", ""),
        values.get("auth", {}).get("openaiApiKey", ""),
        values.get("auth", {}).get("consoleSecret", ""),
        values.get("falkordb", {}).get("password", ""),
        values.get("qdrant", {}).get("apiKey", ""),
    ]
    return [v for v in found if v]


@pytest.mark.parametrize("case", CASES)
def test_secrets_never_appear_in_the_configmap(case: str | None) -> None:
    values = _values(case)
    docs = _rendered_case(case)
    data = _configmap_data(docs)
    assert not SECRET_KEYS & set(data)
    assert not any(re.search(r"(TOKEN|PASSWORD|API_KEY|SECRET)", k) for k in data), data
    blob = yaml.safe_dump(data)
    for secret in _secret_values(values):
        assert secret not in blob
    for dep in _kind(docs, "Deployment"):
        container = dep["spec"]["template"]["spec"]["containers"][0]
        by_name = {e["name"]: e for e in container["env"]}
        for key in SECRET_KEYS:
            assert "value" not in by_name[key] and by_name[key]["valueFrom"]["secretKeyRef"]["key"] == key


def test_secret_values_go_to_the_chart_secret() -> None:
    values = _values("singlebinary-values.yaml")
    (secret,) = _kind(_rendered_case("singlebinary-values.yaml"), "Secret")
    decoded = {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
    assert decoded == {
        "AUTOMEM_API_TOKEN": values["auth"]["apiToken"],
        "ADMIN_API_TOKEN": values["auth"]["adminToken"],
        "AUTOMEM_CONSOLE_SECRET": values["auth"]["consoleSecret"],
        "FALKORDB_PASSWORD": values["falkordb"]["password"],
        "QDRANT_API_KEY": values["qdrant"]["apiKey"],
        "NATS_TOKEN": values["nats"]["token"],
    }


def test_empty_tokens_are_generated() -> None:
    (secret,) = _kind(_rendered_case(None), "Secret")
    for key in ("AUTOMEM_API_TOKEN", "ADMIN_API_TOKEN"):
        assert len(base64.b64decode(secret["data"][key])) == 40
    assert len(base64.b64decode(secret["data"]["AUTOMEM_CONSOLE_SECRET"])) == 48


@pytest.mark.parametrize("case", CASES)
def test_the_gateway_reads_the_console_secret_from_the_secret(case: str | None) -> None:
    """The console's login cookie is the API key sealed with AUTOMEM_CONSOLE_SECRET: every
    gateway replica must read the one value from the Secret (a random secret per pod sent a
    console request reaching another replica to the login page); no other component gets it."""
    values = _values(case)
    docs = _rendered_case(case)
    secret_name = values.get("existingSecret") or f"{RELEASE}-automem"
    served = 0
    for dep in _kind(docs, "Deployment"):
        component = dep["metadata"]["labels"]["app.kubernetes.io/component"]
        container = dep["spec"]["template"]["spec"]["containers"][0]
        entries = [e for e in container["env"] if e["name"] == "AUTOMEM_CONSOLE_SECRET"]
        if component not in ("gateway", "single-binary"):
            assert entries == [], component
            continue
        served += 1
        (entry,) = entries
        assert "value" not in entry
        assert entry["valueFrom"]["secretKeyRef"] == {"name": secret_name, "key": "AUTOMEM_CONSOLE_SECRET",
                                                      "optional": True}, entry
    assert served == 1
    assert "AUTOMEM_CONSOLE_SECRET" not in _configmap_data(docs)


def test_existing_secret_replaces_the_chart_secret() -> None:
    docs = _rendered_case("existing-secret-values.yaml")
    assert _kind(docs, "Secret") == []
    refs = [
        env["valueFrom"]["secretKeyRef"]
        for _, pod in _pod_specs(docs)
        for container in pod["containers"]
        for env in container.get("env", [])
        if "secretKeyRef" in env.get("valueFrom", {})
    ]
    assert refs and {r["name"] for r in refs} == {"automem-credentials"}
    assert all(r["optional"] is True for r in refs)
    assert _kind(docs, "ServiceAccount") == []
    (dep,) = _kind(docs, "Deployment")
    assert dep["spec"]["template"]["spec"]["serviceAccountName"] == "automem"


# --- in-chart dependencies ----------------------------------------------------------------


def test_quickstart_runs_in_chart_nats_jetstream_and_falkordb_with_pvcs() -> None:
    docs = _rendered_case("quickstart-values.yaml")
    sets = _by_component(docs, "StatefulSet")
    assert set(sets) == {"nats", "falkordb"}
    (nats,) = sets["nats"]["spec"]["template"]["spec"]["containers"]
    assert nats["image"].startswith("nats:") and "--jetstream" in nats["command"][-1]
    (falkordb,) = sets["falkordb"]["spec"]["template"]["spec"]["containers"]
    assert falkordb["image"].startswith("falkordb/falkordb:")
    # Restart at scale: the same AOF settings as the embedded launcher.
    script = falkordb["command"][-1]
    for option in ("--appendonly yes", "--aof-use-rdb-preamble yes", "--auto-aof-rewrite-percentage 50",
                   "EFFECTS_THRESHOLD 0"):
        assert option in script
    for sts in sets.values():
        (claim,) = sts["spec"]["volumeClaimTemplates"]
        assert claim["metadata"]["name"] == "data"
        services = {s["metadata"]["name"]: s for s in _kind(docs, "Service")}
        assert sts["spec"]["serviceName"] in services
        assert services[sts["spec"]["serviceName"]]["spec"]["clusterIP"] == "None"
    data = _configmap_data(docs)
    assert data["NATS_URL"] == f"nats://{_name('nats')}:4222"
    assert data["FALKORDB_HOST"] == _name("falkordb")


def _requires_a_generated_secret(component: str, key: str, option: str) -> dict[str, Any]:
    """Check that in the quick start (in-chart stores) the chart's Secret holds a generated
    40-character ``key``, that the ``component`` server starts with ``option "$key"`` when the
    Secret holds it and reads it from there, and that every service reads it too; without the
    in-chart store (the default values) nothing is generated. Returns the server container."""
    docs = _rendered_case("quickstart-values.yaml")
    (secret,) = _kind(docs, "Secret")
    assert len(base64.b64decode(secret["data"][key])) == 40
    (server,) = _by_component(docs, "StatefulSet")[component]["spec"]["template"]["spec"]["containers"]
    assert f'${{{key}:+{option} "${key}"}}' in server["command"][-1]
    ref = {e["name"]: e for e in server["env"]}[key]["valueFrom"]["secretKeyRef"]
    assert ref["key"] == key and ref["name"] == secret["metadata"]["name"]
    for dep in _kind(docs, "Deployment"):
        container = dep["spec"]["template"]["spec"]["containers"][0]
        assert key in {e["name"] for e in container["env"]}, dep["metadata"]["name"]
    (default_secret,) = _kind(_rendered_case(None), "Secret")
    assert key not in default_secret["data"]
    return server


def test_in_chart_nats_requires_a_token_the_services_present() -> None:
    """The in-chart NATS accepted any client in the namespace (the embedded one requires a
    token since 2026-12-03): the chart's Secret now holds a generated NATS_TOKEN, the server
    is started with ``--auth`` when the Secret holds one, and every service reads it."""
    nats = _requires_a_generated_secret("nats", "NATS_TOKEN", "--auth")
    assert nats["command"][:2] == ["sh", "-c"] and nats["command"][2].startswith("exec nats-server --jetstream")


def test_in_chart_falkordb_requires_a_password_the_services_present() -> None:
    """The in-chart FalkorDB ran without a password unless one was set (and the quick start
    set one published in this repository): any pod in the cluster could read or write every
    scope's memories and the key hashes. The chart's Secret now holds a generated
    FALKORDB_PASSWORD, the server requires it, and every service reads it (as NATS_TOKEN)."""
    assert "password" not in _values("quickstart-values.yaml")["falkordb"]
    _requires_a_generated_secret("falkordb", "FALKORDB_PASSWORD", "--requirepass")


def test_external_stores_are_used_when_in_chart_ones_are_off() -> None:
    docs = _rendered_case("distributed-values.yaml")
    assert _kind(docs, "StatefulSet") == []
    data = _configmap_data(docs)
    assert data["NATS_URL"] == "nats://nats.messaging.svc:4222"
    assert data["FALKORDB_HOST"] == "falkordb.graph.svc"
    assert data["QDRANT_URL"] == "http://qdrant.vectors.svc:6333"
    assert data["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://otel-collector.observability.svc:4317"
    assert data["AUTOMEM_RECALL_MAX_LIMIT"] == "50"


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """True when a Kubernetes label selector (matchLabels, matchExpressions with In) selects ``labels``."""
    if not selector.get("matchLabels", {}).items() <= labels.items():
        return False
    return all(labels.get(e["key"]) in e["values"] for e in selector.get("matchExpressions", [])
               if e["operator"] == "In")


@pytest.mark.parametrize("mode", ["Distributed", "SingleBinary"])
def test_service_monitor_is_off_by_default_and_scrapes_every_process_metrics_port(chart: Any, mode: str) -> None:
    assert _kind(_rendered_case(None), "ServiceMonitor") == []
    docs = _render(chart, {"deploymentMode": mode, "serviceMonitor": {"enabled": True}})
    (monitor,) = _kind(docs, "ServiceMonitor")
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["path"] == "/metrics" and endpoint["port"] == "metrics"
    components = {"Distributed": {"gateway", "ingest", "recall", "enrich", "consolidate"},
                  "SingleBinary": {"single-binary"}}[mode]
    # Every automem process: a containerPort "metrics" and AUTOMEM_METRICS_PORT set to it.
    for deployment in _kind(docs, "Deployment"):
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        port = next(p["containerPort"] for p in container["ports"] if p["name"] == "metrics")
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env["AUTOMEM_METRICS_PORT"] == str(port), deployment["metadata"]["name"]
    # The ServiceMonitor selects each component's Service, which has the metrics port; the
    # Services it selects without one (headless gRPC) yield no target, so no pod is scraped twice.
    scraped = {svc["metadata"]["labels"]["app.kubernetes.io/component"] for svc in _kind(docs, "Service")
               if _selects(monitor["spec"]["selector"], svc["metadata"]["labels"])
               and any(p["name"] == "metrics" for p in svc["spec"]["ports"])}
    assert scraped == components
    for svc in _kind(docs, "Service"):
        if svc["spec"].get("clusterIP") == "None":
            assert all(p["name"] != "metrics" for p in svc["spec"]["ports"])


# --- values schema and documentation -------------------------------------------------------


@pytest.mark.parametrize(
    "values",
    [
        {"unknownKey": True},
        {"gateway": {"replica": 3}},
        {"nats": {"enabled": True, "urls": "nats://x:4222"}},
        {"deploymentMode": "Microservices"},
        {"config": {"embeddingProvider": "word2vec"}},
        {"ingress": {"enabled": True, "hosts": [{"host": "memory.example.com"}]}},
        {"grpc": {"tls": {"enabled": "yes"}}},
        {"prometheusRule": {"for": "ten minutes"}},
        {"networkPolicy": {"allowAll": True}},
        {"recall": {"extraVolumes": {"name": "x"}}},
        # Credentials the services refuse at start (every pod would crash) or that nats-server
        # reads as a bcrypt hash (no client could connect): refused when rendering.
        {"nats": {"enabled": True, "token": "line one\nline two"}},
        {"nats": {"enabled": True, "token": "t" * 513}},
        {"nats": {"enabled": True, "token": "$2a$11$abcdefghijklmnopqrstuv"}},
        {"falkordb": {"enabled": True, "password": "tab\there"}},
        {"auth": {"consoleSecret": "shorter-than-32-characters"}},
        # Values that rendered and did nothing (break-it review): traces on with nowhere to
        # send them; a token beside existingSecret (the chart writes no Secret); a
        # Distributed component at 0 replicas without an HPA (nothing enriched, ever).
        {"otel": {"enabled": True}},
        {"existingSecret": "mine", "auth": {"apiToken": "dropped"}},
        {"existingSecret": "mine", "falkordb": {"password": "dropped"}},
        {"existingSecret": "mine", "auth": {"consoleSecret": "c" * 32}},
        {"deploymentMode": "Distributed", "enrich": {"replicas": 0}},
        {"deploymentMode": "Distributed", "gateway": {"replicas": 0}},
    ],
    ids=["top-level", "component", "nats", "mode-enum", "provider-enum", "ingress-paths", "tls-bool",
         "rule-for", "netpol-key", "volumes-list", "nats-token-newline", "nats-token-long", "nats-token-bcrypt",
         "falkordb-password-tab", "console-secret-short", "otel-without-endpoint", "token-beside-existing-secret",
         "password-beside-existing-secret", "console-secret-beside-existing-secret", "enrich-at-zero",
         "gateway-at-zero"],
)
def test_unknown_or_invalid_values_fail_schema_validation(chart: Any, values: dict[str, Any]) -> None:
    with pytest.raises(helm_python.HelmValuesError):
        chart.validate_schema(values)
    with pytest.raises(helm_python.HelmValuesError):
        chart.render(values, name=RELEASE, namespace=NAMESPACE)
    report = helm_python.lint(CHART, values, strict=True)
    assert report["errors"], report


def test_values_file_with_an_unknown_key_fails_schema_validation(chart: Any, tmp_path: Path) -> None:
    bad = tmp_path / "typo-values.yaml"
    bad.write_text("deploymentMode: Distributed\ningest:\n  replicaCount: 3\n")
    values = helm_python.values_from_yaml(bad.read_text())
    with pytest.raises(helm_python.HelmValuesError, match="replicaCount"):
        chart.validate_schema(values)


def _schema_paths(schema: dict[str, Any], prefix: str = "") -> set[str]:
    """Dotted paths of every property the schema declares explicitly."""
    paths: set[str] = set()
    for key, sub in schema.get("properties", {}).items():
        path = f"{prefix}{key}"
        paths.add(path)
        paths |= _schema_paths(sub, f"{path}.")
    return paths


def _documented_paths(text: str) -> tuple[set[str], set[str]]:
    """(every key path in values.yaml, the paths whose comment block starts with "# <path> -- ")."""
    keys: set[str] = set()
    documented: set[str] = set()
    stack: list[tuple[int, str]] = []
    comment = ""  # first line of the comment block right above the current line
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            comment = comment or stripped
            continue
        match = re.match(r"^(\s*)([A-Za-z_][\w.-]*):", line)
        if match:
            indent = len(match.group(1))
            while stack and stack[-1][0] >= indent:
                stack.pop()
            path = ".".join([s for _, s in stack] + [match.group(2)])
            stack.append((indent, match.group(2)))
            keys.add(path)
            if comment.startswith(f"# {path} -- "):
                documented.add(path)
        comment = ""
    return keys, documented


def test_schema_covers_every_value_and_every_value_is_documented(chart: Any) -> None:
    schema = chart.schema
    assert schema["additionalProperties"] is False
    declared = _schema_paths(schema)
    keys, documented = _documented_paths((CHART / "values.yaml").read_text())
    # Every explicitly declared value exists in values.yaml and is documented by a comment
    # starting with its name; everything else in values.yaml sits under a pass-through map
    # (resources, securityContext, ...).
    assert declared <= keys, sorted(declared - keys)
    assert declared <= documented, sorted(declared - documented)
    undeclared = keys - declared
    for path in undeclared:
        assert any(path.startswith(f"{p}.") for p in declared), path
    for path in declared:
        for part in path.split("."):
            assert re.fullmatch(r"[a-z][A-Za-z0-9]*", part), f"{path} is not camelCase"


# --- what the chart runs is what the CLI and the settings accept (issue 15, items 1 and 8) -------


def _automem_containers(docs: Any) -> list[tuple[str, dict[str, Any]]]:
    return [(f"{name}/{c['name']}", c) for name, spec in _pod_specs(docs) for c in spec["containers"]
            if "automem" in c.get("image", "") and c.get("args")]


def _setting_names() -> set[str]:
    from automem.common.settings import Settings

    names: set[str] = set()
    for field in Settings.model_fields.values():
        alias = field.validation_alias
        names.update(getattr(alias, "choices", None) or ([alias] if isinstance(alias, str) else []))
    return names


@pytest.mark.parametrize("case", CASES)
def test_every_rendered_command_line_is_accepted_by_the_cli(case: str | None) -> None:
    from automem.cli import build_parser

    containers = _automem_containers(_rendered_case(case))
    assert containers
    for where, container in containers:
        try:
            build_parser().parse_args([str(a) for a in container["args"]])
        except SystemExit as exc:
            raise AssertionError(f"{where}: automem rejects {container['args']}") from exc


@pytest.mark.parametrize("case", CASES)
def test_every_rendered_variable_is_a_setting(case: str | None) -> None:
    docs = _rendered_case(case)
    known = _setting_names()
    names = set(_configmap_data(docs))
    referenced: set[str] = set()  # used by Kubernetes' $(NAME) expansion in other values
    for _, container in _automem_containers(docs):
        names.update(e["name"] for e in container.get("env", []))
        for text in [str(e.get("value", "")) for e in container.get("env", [])] + [str(a) for a in container["args"]]:
            referenced.update(re.findall(r"\$\(([A-Z0-9_]+)\)", text))
    # OTEL_* are read by the OpenTelemetry SDK itself as well; the rest must be ours.
    unknown = {n for n in names if n not in known and n not in referenced and not n.startswith("OTEL_")}
    assert not unknown, f"variables no setting reads: {sorted(unknown)}"


# --- optional features (issue 15, item 4) ---------------------------------------------------

FEATURES = "features-values.yaml"
#: feature -> (values turning it on, the kind it renders).
OPTIONAL = {
    "ingress": ({"ingress": {"enabled": True}}, "Ingress"),
    "httpRoute": ({"httpRoute": {"enabled": True, "parentRefs": [{"name": "public"}]}}, "HTTPRoute"),
    "networkPolicy": ({"networkPolicy": {"enabled": True}}, "NetworkPolicy"),
    "prometheusRule": ({"prometheusRule": {"enabled": True}}, "PrometheusRule"),
    "serviceMonitor": ({"serviceMonitor": {"enabled": True}}, "ServiceMonitor"),
    "dashboard": ({"dashboard": {"enabled": True}}, "ConfigMap"),
}


def _count(docs: Any, kind: str) -> int:
    """How many ``kind`` resources (for ConfigMap: dashboards only, not the settings)."""
    return len([d for d in docs if d["kind"] == kind
                and (kind != "ConfigMap" or d["metadata"]["name"].endswith("-dashboard"))])


@pytest.mark.parametrize("mode", ["SingleBinary", "Distributed"])
@pytest.mark.parametrize("feature", sorted(OPTIONAL))
def test_each_optional_feature_renders_only_when_on_and_validates(feature: str, mode: str) -> None:
    on, kind = OPTIONAL[feature]
    off_docs = render({"deploymentMode": mode})
    on_docs = render({"deploymentMode": mode, **on})
    assert _count(off_docs, kind) == 0, kind
    assert _count(on_docs, kind) >= 1, kind
    for doc in on_docs:
        if doc["kind"] not in CRD_KINDS:
            for version in K8S_VERSIONS:
                kubernetes_validate.validate(doc, version, strict=True)


def test_the_helm_test_pod_is_on_by_default_and_can_be_turned_off() -> None:
    (pod,) = _kind(_rendered_case(None), "Pod")
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    assert _kind(render({"tests": {"enabled": False}}), "Pod") == []


@pytest.mark.parametrize("case", [None, "quickstart-values.yaml", FEATURES])
def test_ingress_httproute_and_helm_test_reach_the_http_service(case: str | None) -> None:
    values = {**_values(case), "ingress": {"enabled": True},
              "httpRoute": {"enabled": True, "parentRefs": [{"name": "public"}]}}
    docs = render(values)
    services = {s["metadata"]["name"]: s for s in _kind(docs, "Service")}
    component = "gateway" if values.get("deploymentMode") == "Distributed" else "single-binary"
    http = services[_name(component)]
    ports = {p["name"]: p["port"] for p in http["spec"]["ports"]}
    (ingress,) = _kind(docs, "Ingress")
    for rule in ingress["spec"]["rules"]:
        for path in rule["http"]["paths"]:
            assert path["backend"]["service"] == {"name": _name(component), "port": {"name": "http"}}
    (route,) = _kind(docs, "HTTPRoute")
    assert route["apiVersion"] == "gateway.networking.k8s.io/v1"
    assert route["spec"]["parentRefs"] == [{"name": "public"}]
    (backend,) = route["spec"]["rules"][0]["backendRefs"]
    assert backend == {"name": _name(component), "port": ports["http"]}
    (pod,) = _kind(docs, "Pod")
    env = {e["name"]: e for e in pod["spec"]["containers"][0]["env"]}
    assert env["AUTOMEM_URL"]["value"] == f"http://{_name(component)}:{ports['http']}"
    assert env["AUTOMEM_API_TOKEN"]["valueFrom"]["secretKeyRef"]["key"] == "AUTOMEM_API_TOKEN"
    script = pod["spec"]["containers"][0]["command"][-1]
    for call in ('http.get("/health")', 'http.post("/memory"', 'http.get("/recall"', "http.delete("):
        assert call in script
    compile(script, "helm-test", "exec")  # the script is valid Python


def test_httproute_without_a_parent_is_refused(chart: Any) -> None:
    with pytest.raises(helm_python.HelmRenderError, match="parentRefs"):
        chart.render({"httpRoute": {"enabled": True}}, name=RELEASE, namespace=NAMESPACE)


# NetworkPolicy semantics: which pod may open which named port of which pod.


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        assert expr["operator"] == "In", expr
        if labels.get(expr["key"]) not in expr["values"]:
            return False
    return True


def _allowed(policies: list[dict[str, Any]], source: dict[str, str] | None, target: dict[str, str],
             port: str) -> bool:
    """Kubernetes' ingress rule: allowed when no policy selects the target pod, or one that
    does has a rule whose ports name ``port`` (or has none) and whose peers match the source
    (``None`` = a pod in another namespace, matched only by namespaceSelector peers or no peers)."""
    chosen = [p for p in policies if _selects(p["spec"]["podSelector"], target)]
    if not chosen:
        return True
    for policy in chosen:
        for rule in policy["spec"].get("ingress") or []:
            if rule.get("ports") and port not in [p["port"] for p in rule["ports"]]:
                continue
            peers = rule.get("from")
            if not peers:
                return True
            for peer in peers:
                if source is None and "namespaceSelector" in peer and "podSelector" not in peer:
                    return True
                if source is not None and "podSelector" in peer and "namespaceSelector" not in peer \
                        and _selects(peer["podSelector"], source):
                    return True
    return False


def test_network_policies_let_only_the_gateway_take_outside_traffic() -> None:
    docs = _rendered_case(FEATURES)
    policies = _kind(docs, "NetworkPolicy")
    pods = {d["metadata"]["labels"]["app.kubernetes.io/component"]: d["spec"]["template"]["metadata"]["labels"]
            for d in docs if d["kind"] in ("Deployment", "StatefulSet")}
    pods["test"] = _kind(docs, "Pod")[0]["metadata"]["labels"]
    outside = None
    assert _allowed(policies, outside, pods["gateway"], "http")
    assert _allowed(policies, pods["test"], pods["gateway"], "http")
    assert _allowed(policies, outside, pods["gateway"], "metrics")  # from the monitoring namespace
    services = ("ingest", "recall", "enrich", "consolidate")
    for target in services:
        assert not _allowed(policies, outside, pods[target], "grpc"), target
        assert not _allowed(policies, pods["test"], pods[target], "grpc"), target
        assert not _allowed(policies, pods["nats"], pods[target], "grpc"), target
        for caller in ("gateway", *services):
            assert _allowed(policies, pods[caller], pods[target], "grpc"), (caller, target)
    for store, port in (("nats", "client"), ("falkordb", "redis")):
        assert not _allowed(policies, outside, pods[store], port)
        assert not _allowed(policies, pods["gateway"], pods[store], port)
        assert not _allowed(policies, pods["test"], pods[store], port)
        for user in services:
            assert _allowed(policies, pods[user], pods[store], port), (user, store)
    # Every policy selects pods that exist, and every named port it opens (but metrics,
    # which a component may not have) is a container port of those pods.
    ports = {c: {p["name"] for ctr in d["spec"]["template"]["spec"]["containers"] for p in ctr.get("ports", [])}
             for d in docs if d["kind"] in ("Deployment", "StatefulSet")
             for c in [d["metadata"]["labels"]["app.kubernetes.io/component"]]}
    for policy in policies:
        (component,) = [c for c, labels in pods.items() if _selects(policy["spec"]["podSelector"], labels)]
        for rule in policy["spec"]["ingress"]:
            for port in rule["ports"]:
                assert port["port"] == "metrics" or port["port"] in ports[component], (component, port)


def test_network_policies_in_single_binary_mode() -> None:
    docs = render({**_values("existing-secret-values.yaml"), "networkPolicy": {"enabled": True}})
    policies = _kind(docs, "NetworkPolicy")
    pods = {d["metadata"]["labels"]["app.kubernetes.io/component"]: d["spec"]["template"]["metadata"]["labels"]
            for d in docs if d["kind"] in ("Deployment", "StatefulSet")}
    assert _allowed(policies, None, pods["single-binary"], "http")
    assert not _allowed(policies, None, pods["single-binary"], "grpc")
    for store, port in (("nats", "client"), ("falkordb", "redis")):
        assert _allowed(policies, pods["single-binary"], pods[store], port)
        assert not _allowed(policies, None, pods[store], port)


# Scheduling, extra volumes and containers, labels, resources.


def _pod(docs: Any, component: str) -> dict[str, Any]:
    return next(d for d in docs if d["kind"] in ("Deployment", "StatefulSet")
                and d["metadata"]["labels"]["app.kubernetes.io/component"] == component)["spec"]["template"]


def test_replicas_spread_by_zone_and_node_unless_a_component_says_otherwise() -> None:
    docs = _rendered_case("distributed-values.yaml")
    for component in ("gateway", "ingest", "recall", "enrich"):
        spec = _pod(docs, component)["spec"]
        selector = {"app.kubernetes.io/name": "automem", "app.kubernetes.io/instance": RELEASE,
                    "app.kubernetes.io/component": component}
        spreads = {c["topologyKey"]: c for c in spec["topologySpreadConstraints"]}
        assert set(spreads) == {"topology.kubernetes.io/zone", "kubernetes.io/hostname"}
        for constraint in spreads.values():
            assert constraint["whenUnsatisfiable"] == "ScheduleAnyway"
            assert constraint["labelSelector"]["matchLabels"] == selector
            assert selector.items() <= _pod(docs, component)["metadata"]["labels"].items()
        (term,) = spec["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
        assert term["podAffinityTerm"]["labelSelector"]["matchLabels"] == selector
    # consolidate's own nodeAffinity replaces the default anti-affinity.
    assert set(_pod(docs, "consolidate")["spec"]["affinity"]) == {"nodeAffinity"}
    # A component's own constraints win; spreadByDefault false renders none.
    features = _rendered_case(FEATURES)
    (own,) = _pod(features, "recall")["spec"]["topologySpreadConstraints"]
    assert own["whenUnsatisfiable"] == "DoNotSchedule"
    bare = render({"deploymentMode": "Distributed", "scheduling": {"spreadByDefault": False}})
    for doc in _kind(bare, "Deployment"):
        assert "topologySpreadConstraints" not in doc["spec"]["template"]["spec"]
        assert "affinity" not in doc["spec"]["template"]["spec"]


def test_extra_volumes_containers_env_and_pod_metadata() -> None:
    docs = _rendered_case(FEATURES)
    enrich = _pod(docs, "enrich")["spec"]
    assert [c["name"] for c in enrich["containers"]] == ["enrich", "log-shipper"]
    assert {"name": "ca-bundle", "configMap": {"name": "corporate-ca-bundle"}} in enrich["volumes"]
    mounts = {m["name"]: m for m in enrich["containers"][0]["volumeMounts"]}
    assert mounts["ca-bundle"]["mountPath"] == "/etc/ssl/corporate"
    gateway_env = {e["name"]: e for e in _pod(docs, "gateway")["spec"]["containers"][0]["env"]}
    assert gateway_env["AUTOMEM_MAX_BODY_BYTES"]["value"] == "2097152"
    for component in ("gateway", "ingest", "recall", "enrich", "consolidate"):
        meta = _pod(docs, component)["metadata"]
        assert meta["labels"]["example.com/tier"] == "backend"
        assert meta["annotations"]["example.com/team"] == "memory"
        assert ("example.com/writes" in meta["labels"]) == (component == "ingest")
    assert _pod(docs, "nats")["metadata"]["annotations"]["example.com/store"] == "nats"


def test_in_chart_nats_and_falkordb_have_resources() -> None:
    quick = _rendered_case("quickstart-values.yaml")
    for store in ("nats", "falkordb"):
        resources = _pod(quick, store)["spec"]["containers"][0]["resources"]
        assert resources["requests"]["cpu"] and resources["requests"]["memory"] and resources["limits"]["memory"]
    falkordb = _pod(_rendered_case(FEATURES), "falkordb")["spec"]["containers"][0]["resources"]
    assert falkordb == {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "2Gi"}}


# gRPC TLS.


def test_grpc_tls_mounts_the_secret_and_probes_the_plaintext_health_port() -> None:
    docs = _rendered_case(FEATURES)
    data = _configmap_data(docs)
    directory = "/etc/automem/grpc-tls"
    assert data["AUTOMEM_GRPC_TLS"] == "true"
    assert data["AUTOMEM_GRPC_TLS_CERT_FILE"] == f"{directory}/tls.crt"
    assert data["AUTOMEM_GRPC_TLS_KEY_FILE"] == f"{directory}/tls.key"
    assert data["AUTOMEM_GRPC_TLS_CA_FILE"] == f"{directory}/ca.crt"
    assert data["AUTOMEM_GRPC_TLS_CLIENT_AUTH"] == "true"
    assert data["AUTOMEM_GRPC_HEALTH_PORT"] == "50052"
    for component in COMPONENTS:
        spec = _pod(docs, component)["spec"]
        volume = next(v for v in spec["volumes"] if v["name"] == "grpc-tls")
        assert volume["secret"]["secretName"] == "automem-grpc-tls"
        container = spec["containers"][0]
        mount = next(m for m in container["volumeMounts"] if m["name"] == "grpc-tls")
        assert mount == {"name": "grpc-tls", "mountPath": directory, "readOnly": True}
        if component in GRPC_COMPONENTS:
            ports = {p["name"]: p["containerPort"] for p in container["ports"]}
            assert ports == {"grpc": 50051, "grpc-health": 50052, "metrics": 9464}
            for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
                assert container[probe]["grpc"]["port"] == 50052
    # Off: no TLS variables, probes on the gRPC port.
    plain = _rendered_case("quickstart-values.yaml")
    assert not [k for k in _configmap_data(plain) if k.startswith("AUTOMEM_GRPC_TLS")]
    assert _pod(plain, "recall")["spec"]["containers"][0]["readinessProbe"]["grpc"]["port"] == 50051


@pytest.mark.parametrize("tls", [{"enabled": True}, {"enabled": True, "secretName": "x", "healthPort": 50051}],
                         ids=["no-secret", "same-port"])
def test_grpc_tls_misconfiguration_is_refused(chart: Any, tls: dict[str, Any]) -> None:
    with pytest.raises(helm_python.HelmRenderError, match="grpc.tls"):
        chart.render({"deploymentMode": "Distributed", "grpc": {"tls": tls}}, name=RELEASE, namespace=NAMESPACE)


# Alerts and dashboard: only metric names the processes really export.


def _exported_names() -> set[str]:
    """Every sample name a process's registry renders (automem/common/metrics.py) once each
    instrument has recorded one value and each scrape-time gauge has one source."""
    import asyncio

    from prometheus_client.parser import text_string_to_metric_families

    from automem.common import metrics
    from automem.common.settings import Settings

    metrics.configure_metrics(Settings())
    for instrument in vars(metrics).values():
        if hasattr(instrument, "record"):
            instrument.record(0.01)
        elif hasattr(instrument, "add"):
            instrument.add(1)

    async def zero() -> float:
        return 0.0

    async def scrape() -> bytes:
        gauges = [g for g in vars(metrics).values() if isinstance(g, metrics._AsyncGauge)]
        unwatch = [gauge.watch(zero, {}) for gauge in gauges]
        try:
            return await asyncio.to_thread(metrics.render)
        finally:
            for stop in unwatch:
                stop()

    text = asyncio.run(scrape()).decode()
    return {sample.name for family in text_string_to_metric_families(text) for sample in family.samples}


def _metric_names(expr: str) -> set[str]:
    """The metric names of a PromQL expression: label matchers (``{...}``) and grouping
    label lists (``by (...)``, ``on (...)``) dropped first."""
    bare = re.sub(r"\{[^}]*\}", "", expr)
    bare = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", bare)
    return set(re.findall(r"\b((?:automem|process|http|rpc|db|messaging|gen_ai)_[a-z0-9_]+)\b", bare))


def test_alerts_and_dashboard_use_metric_names_the_processes_export() -> None:
    exported = _exported_names()
    docs = _rendered_case(FEATURES)
    (rule,) = _kind(docs, "PrometheusRule")
    (group,) = rule["spec"]["groups"]
    alerts = {r["alert"]: r for r in group["rules"]}
    assert {"AutomemEnrichmentLag", "AutomemDeadLetters", "AutomemHighErrorRate",
            "AutomemGraphVectorDrift"} <= set(alerts)
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    for name, alert in alerts.items():
        if name == "AutomemGatewayAbsent":  # from the values' additionalRules
            continue
        names = _metric_names(alert["expr"])
        assert names and names <= exported, (name, names - exported)
        assert f'namespace="{NAMESPACE}"' in alert["expr"], name
    assert "> 1000" in alerts["AutomemEnrichmentLag"]["expr"]
    # Only a backlog that is not shrinking (docs/observability.md's rule; the chart's left it out).
    assert "deriv(max(automem_enrichment_queue_depth" in alerts["AutomemEnrichmentLag"]["expr"]
    assert "> 0.05" in alerts["AutomemHighErrorRate"]["expr"]
    # The chart's own alerts go by the names the docs give them (three had other names in
    # docs/observability.md: break-it review).
    repo = Path(__file__).resolve().parents[2]
    suggested = set(re.findall(r"- alert: (\w+)", (repo / "docs" / "observability.md").read_text()))
    tabled = set(re.findall(r"^\| `(Automem\w+)` \|", (repo / "docs" / "kubernetes.md").read_text(), re.MULTILINE))
    own = set(alerts) - {"AutomemGatewayAbsent"}
    assert own <= suggested and own == tabled, (own - suggested, own ^ tabled)
    dashboards = [d for d in _kind(docs, "ConfigMap") if d["metadata"]["name"].endswith("-dashboard")]
    (dashboard,) = dashboards
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    board = json.loads(dashboard["data"]["automem.json"])
    exprs = [t["expr"] for panel in board["panels"] for t in panel["targets"]]
    assert exprs
    used: set[str] = set()
    for expr in exprs:
        names = _metric_names(expr)
        assert names and names <= exported, (expr, names - exported)
        used |= names
    for family in ("automem_enrichment_queue_depth", "automem_enrichment_dead_lettered_total",
                   "automem_sync_memories", "automem_sync_vectors", "http_server_request_duration_seconds_bucket"):
        assert family in used, family


# --- names Kubernetes accepts, extra env and ports that cannot collide ----------------------

#: 60 characters: Helm's CLI stops at 53, but the SDK does not, nor do fullnameOverride and nameOverride.
LONG_RELEASE = "automem-long-release-name-" + "x" * 34
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_EVERY_FEATURE = {"ingress": {"enabled": True}, "networkPolicy": {"enabled": True},
                  "httpRoute": {"enabled": True, "parentRefs": [{"name": "public"}]},
                  "serviceMonitor": {"enabled": True}, "prometheusRule": {"enabled": True},
                  "dashboard": {"enabled": True}}
#: (release, values): every object the chart can render, under names too long to keep whole.
LONG_NAMES = {
    "distributed": (LONG_RELEASE, values_of(FEATURES)),
    "distributed-cluster-ip": (LONG_RELEASE, {**values_of("quickstart-values.yaml"), **_EVERY_FEATURE,
                                              "grpc": {"clientLoadBalancing": False}}),
    "single-binary": (LONG_RELEASE, {**values_of("singlebinary-values.yaml"), **_EVERY_FEATURE,
                                     "nats": {"enabled": True}, "falkordb": {"enabled": True}}),
    "helm-cli-max": ("r" * 53, values_of(FEATURES)),
    "name-override": (RELEASE, {**values_of(FEATURES), "nameOverride": "automem-" + "n" * 62}),
    "fullname-override": (RELEASE, {**values_of(FEATURES), "fullnameOverride": "f" * 70}),
}


def _service_host(address: str) -> str:
    """The Service an address names: dns:///<svc>.<ns>.svc...:port, nats://<svc>:4222, <svc>:port, <svc>."""
    rest = re.sub(r"^[a-z]+://", "", address).lstrip("/")
    return re.split(r"[.:/]", rest, maxsplit=1)[0]


def _dangling_references(docs: Any) -> list[str]:
    """Every reference between rendered objects that names no rendered object (or selects no pod)."""
    names = {kind: {d["metadata"]["name"] for d in _kind(docs, kind)}
             for kind in ("Service", "Deployment", "ConfigMap", "Secret", "ServiceAccount", "PersistentVolumeClaim")}
    headless = {s["metadata"]["name"] for s in _kind(docs, "Service") if s["spec"].get("clusterIP") == "None"}
    pod_labels = [d["spec"]["template"]["metadata"]["labels"] for d in docs
                  if d["kind"] in ("Deployment", "StatefulSet")]
    problems: list[str] = []

    def need(kind: str, name: str, where: str) -> None:
        if name not in names[kind]:
            problems.append(f"{where}: no {kind} {name}")

    (settings,) = [c for c in _kind(docs, "ConfigMap") if "AUTOMEM_HOST" in c["data"]]
    data = settings["data"]
    in_chart = {s["metadata"]["labels"]["app.kubernetes.io/component"] for s in _kind(docs, "StatefulSet")}
    stores = [key for store, key in (("nats", "NATS_URL"), ("falkordb", "FALKORDB_HOST")) if store in in_chart]
    for key in stores + [k for k in data if k.endswith("_ADDR")]:
        need("Service", _service_host(data[key]), f"ConfigMap {key}={data[key]}")
    for sts in _kind(docs, "StatefulSet"):
        if sts["spec"]["serviceName"] not in headless:
            problems.append(f"StatefulSet {sts['metadata']['name']}: no headless Service {sts['spec']['serviceName']}")
    for ingress in _kind(docs, "Ingress"):
        for rule in ingress["spec"]["rules"]:
            for path in rule["http"]["paths"]:
                need("Service", path["backend"]["service"]["name"], "Ingress")
    for route in _kind(docs, "HTTPRoute"):
        for rule in route["spec"]["rules"]:
            for ref in rule["backendRefs"]:
                need("Service", ref["name"], "HTTPRoute")
    for hpa in _kind(docs, "HorizontalPodAutoscaler"):
        need("Deployment", hpa["spec"]["scaleTargetRef"]["name"], "HPA")
    for name, pod in _pod_specs(docs):
        if "serviceAccountName" in pod:
            need("ServiceAccount", pod["serviceAccountName"], name)
        for volume in pod.get("volumes", []):
            if "persistentVolumeClaim" in volume:
                need("PersistentVolumeClaim", volume["persistentVolumeClaim"]["claimName"], name)
        for container in pod["containers"]:
            for source in container.get("envFrom", []):
                need("ConfigMap", source["configMapRef"]["name"], name)
            for env in container.get("env", []):
                if "secretKeyRef" in env.get("valueFrom", {}):
                    need("Secret", env["valueFrom"]["secretKeyRef"]["name"], f"{name} {env['name']}")
                if env["name"] == "AUTOMEM_URL":
                    need("Service", _service_host(env["value"]), f"{name} AUTOMEM_URL")
    for doc in docs:
        selector = {"Service": lambda d: {"matchLabels": d["spec"]["selector"]},
                    "PodDisruptionBudget": lambda d: d["spec"]["selector"],
                    "NetworkPolicy": lambda d: d["spec"]["podSelector"]}.get(doc["kind"])
        if selector and not any(_selects(selector(doc), labels) for labels in pod_labels):
            problems.append(f"{doc['kind']} {doc['metadata']['name']} selects no pod")
    return problems


@pytest.mark.parametrize("case", sorted(LONG_NAMES))
def test_long_release_names_give_valid_distinct_names_that_every_reference_uses(chart: Any, case: str) -> None:
    """Names are DNS-1123 labels of at most 63 characters (a StatefulSet's at most 52: its pods
    carry the label controller-revision-hash=<name>-<hash>). The chart cut the full name to 63
    and then appended "-headless" (or took 50 and appended "-consolidate-headless"): a
    60-character release rendered Services of up to 71 characters and StatefulSets of 59."""
    release, values = LONG_NAMES[case]
    docs = _render(chart, values, release)
    seen: set[tuple[str, str]] = set()
    for doc in docs:
        kind, name = doc["kind"], doc["metadata"]["name"]
        assert DNS_LABEL.fullmatch(name) and len(name) <= 63, (kind, name, len(name))
        assert (kind, name) not in seen, f"two {kind}s named {name}"
        seen.add((kind, name))
        if kind == "StatefulSet":
            assert len(name) <= 52, (name, len(name))
        labels = [doc["metadata"]["labels"]] + ([doc["spec"]["template"]["metadata"]["labels"]]
                                                if "template" in doc.get("spec", {}) else [])
        for label_set in labels:
            for key, value in label_set.items():
                assert len(str(value)) <= 63, (kind, name, key, value)
    assert {"Service", "StatefulSet", "Deployment", "NetworkPolicy"} <= {k for k, _ in seen}
    assert _dangling_references(docs) == []
    for doc in docs:
        if doc["kind"] not in CRD_KINDS:
            kubernetes_validate.validate(doc, K8S_VERSIONS[-1], strict=True)


@pytest.mark.parametrize("case", [None, "quickstart-values.yaml", FEATURES])
def test_short_release_names_are_unchanged(case: str | None) -> None:
    """Upgrades must not rename objects: a name that fits is "<release>-automem-<component>"
    (and "-headless" for the headless Services), as it always was."""
    docs = render({**values_of(case), **_EVERY_FEATURE})
    names = {(d["kind"], d["metadata"]["name"]) for d in docs}
    mode = values_of(case).get("deploymentMode", "SingleBinary")
    components = COMPONENTS if mode == "Distributed" else ("single-binary",)
    for component in components:
        assert ("Deployment", _name(component)) in names
        assert ("Service", _name(component)) in names
    if mode == "Distributed":
        for component in GRPC_COMPONENTS:
            assert ("Service", f"{_name(component)}-headless") in names
    if values_of(case).get("nats", {}).get("enabled"):
        for store in ("nats", "falkordb"):
            assert {("StatefulSet", _name(store)), ("Service", _name(store)),
                    ("Service", f"{_name(store)}-headless")} <= names
    assert {("ConfigMap", f"{RELEASE}-automem"), ("ConfigMap", f"{RELEASE}-automem-dashboard"),
            ("Secret", f"{RELEASE}-automem"), ("Pod", _name("test"))} <= names
    assert _dangling_references(docs) == []


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"config": {"extraEnv": {"NATS_URL": "nats://other:4222"}}},
         r"config\.extraEnv\.NATS_URL: the chart sets NATS_URL itself, from nats\.url"),
        ({"nats": {"enabled": True}, "config": {"extraEnv": {"NATS_URL": "nats://other:4222"}}},
         r"config\.extraEnv\.NATS_URL: .*from nats\.enabled"),
        ({"config": {"extraEnv": {"AUTOMEM_API_TOKEN": "t"}}},
         r"config\.extraEnv\.AUTOMEM_API_TOKEN: .*from auth\.apiToken"),
        ({"existingSecret": "mine", "config": {"extraEnv": {"NATS_TOKEN": "t"}}},
         r"config\.extraEnv\.NATS_TOKEN: .*from existingSecret mine"),
        ({"config": {"extraEnv": {"AUTOMEM_CONSOLE_SECRET": "c" * 32}}},
         r"config\.extraEnv\.AUTOMEM_CONSOLE_SECRET: .*from auth\.consoleSecret"),
        ({"config": {"extraEnv": {"AUTOMEM_METRICS_PORT": "9000"}}},
         r"config\.extraEnv\.AUTOMEM_METRICS_PORT: .*from ports\.metrics"),
        ({"singleBinary": {"extraEnv": [{"name": "AUTOMEM_API_TOKEN", "value": "t"}]}},
         r"singleBinary\.extraEnv: the chart sets AUTOMEM_API_TOKEN itself, from auth\.apiToken"),
        ({"deploymentMode": "Distributed", "recall": {"extraEnv": [{"name": "OTEL_SERVICE_NAME", "value": "x"}]}},
         r"recall\.extraEnv: the chart sets OTEL_SERVICE_NAME itself"),
        ({"singleBinary": {"extraEnv": [{"name": "X", "value": "1"}, {"name": "X", "value": "2"}]}},
         r"singleBinary\.extraEnv names X twice"),
    ],
    ids=["config-nats-url", "config-in-chart-nats-url", "config-api-token", "config-existing-secret-key",
         "config-console-secret", "config-metrics-port", "component-api-token", "component-otel-name",
         "component-twice"],
)
def test_extra_env_naming_a_variable_the_chart_sets_is_refused(chart: Any, values: dict[str, Any],
                                                               message: str) -> None:
    """config.extraEnv repeating a ConfigMap key gave the ConfigMap that key twice, and one naming
    a container env entry (the Secret's keys, AUTOMEM_METRICS_PORT...) was overridden by it; a
    component's extraEnv repeating an env entry gave the container two (Kubernetes keeps the
    last). All silently: now refused, naming the variable and the value that sets it."""
    with pytest.raises(helm_python.HelmRenderError, match=message):
        chart.render(values, name=RELEASE, namespace=NAMESPACE)


def test_a_component_may_override_a_configmap_setting_for_itself(chart: Any) -> None:
    """Debugging one component: its extraEnv sets AUTOMEM_LOG_LEVEL over the ConfigMap's (env
    wins over envFrom); the other components keep the ConfigMap's."""
    docs = _render(chart, {"deploymentMode": "Distributed", "recall": {"extraEnv": [
        {"name": "AUTOMEM_LOG_LEVEL", "value": "DEBUG"}]}})
    envs = {name: {e["name"]: e.get("value") for c in pod["containers"] for e in c.get("env", [])}
            for name, pod in _pod_specs(docs)}
    assert any(name.endswith("recall") and env.get("AUTOMEM_LOG_LEVEL") == "DEBUG" for name, env in envs.items()), envs
    assert not any(name.endswith("gateway") and "AUTOMEM_LOG_LEVEL" in env for name, env in envs.items())


@pytest.mark.parametrize("case", CASES)
def test_no_container_has_an_env_name_or_port_twice(case: str | None) -> None:
    for name, pod in _pod_specs(_rendered_case(case)):
        for container in pod["containers"]:
            env = [e["name"] for e in container.get("env", [])]
            assert len(env) == len(set(env)), (name, container["name"], env)
            ports = [p["containerPort"] for p in container.get("ports", [])]
            assert len(ports) == len(set(ports)), (name, container["name"], ports)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"ports": {"metrics": 8001}}, "ports.http and ports.metrics are both 8001"),
        ({"ports": {"metrics": 50051}}, "ports.grpc and ports.metrics are both 50051"),
        ({"ports": {"http": 50051}}, "ports.http and ports.grpc are both 50051"),
        ({"deploymentMode": "Distributed", "ports": {"metrics": 8001}}, "ports.http and ports.metrics"),
        ({"deploymentMode": "Distributed", "ports": {"grpc": 9464}}, "ports.grpc and ports.metrics"),
        ({"grpc": {"tls": {"enabled": True, "secretName": "s", "healthPort": 9464}}},
         "grpc.tls.healthPort and ports.metrics are both 9464"),
        ({"grpc": {"tls": {"enabled": True, "secretName": "s", "healthPort": 8001}}},
         "ports.http and grpc.tls.healthPort are both 8001"),
    ],
    ids=["metrics-http", "metrics-grpc", "http-grpc", "distributed-metrics-http", "distributed-grpc-metrics",
         "health-metrics", "health-http"],
)
def test_two_ports_of_one_container_being_equal_is_refused(chart: Any, values: dict[str, Any],
                                                           message: str) -> None:
    """ports.metrics equal to ports.http rendered two containerPorts 8001 (and the process could
    not bind both); refused naming both values."""
    with pytest.raises(helm_python.HelmRenderError, match=re.escape(message)):
        chart.render(values, name=RELEASE, namespace=NAMESPACE)


def test_ports_of_different_pods_may_be_equal(chart: Any) -> None:
    """Distributed: the gateway serves no gRPC, the gRPC components no HTTP, so one number may serve both."""
    docs = _render(chart, {"deploymentMode": "Distributed", "ports": {"http": 50051}})
    deployments = _by_component(docs, "Deployment")
    for component, dep in deployments.items():
        (container,) = dep["spec"]["template"]["spec"]["containers"]
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        expected = {"http": 50051} if component == "gateway" else {"grpc": 50051}
        assert ports == {**expected, "metrics": 9464}, component
