"""Rendering the Helm chart in deploy/helm/automem for tests (helm-python-sdk, offline):
``helm template`` of the chart with a ``ci/*-values.yaml`` file, as a list of manifests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import helm_python
import yaml

CHART = Path(__file__).resolve().parents[1] / "deploy" / "helm" / "automem"
CI_DIR = CHART / "ci"
RELEASE = "mem"
NAMESPACE = "automem"


def values_of(case: str | None) -> dict[str, Any]:
    """The values of ``ci/<case>`` ({} for None: the chart defaults)."""
    if case is None:
        return {}
    return yaml.safe_load((CI_DIR / case).read_text()) or {}


def render(values: dict[str, Any]) -> list[dict[str, Any]]:
    """Every manifest (NOTES.txt left out) the chart renders with ``values`` as release
    :data:`RELEASE` in :data:`NAMESPACE`."""
    chart = helm_python.Chart.load(CHART)
    try:
        out = chart.render(values, name=RELEASE, namespace=NAMESPACE)
    finally:
        chart.close()
    docs: list[dict[str, Any]] = []
    for path, text in sorted(out.items()):
        if not path.endswith("NOTES.txt"):
            docs.extend(d for d in yaml.safe_load_all(text) if d)
    return docs
