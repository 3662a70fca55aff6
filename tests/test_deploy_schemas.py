"""The deployment files against their published JSON schemas, with no Docker
engine, cluster or network: docker-compose.yml against the Compose
Specification, the Kubernetes manifests (deploy/k8s/) against the Kubernetes
v1.33 API schemas (strict: unknown fields are errors) and KEDA's ScaledObject
CRD, the kustomizations, and the Prometheus configurations and rules against
SchemaStore's schemas (promtool, when installed, checks them too:
tests/test_deploy_files.py, tests/test_deploy_k8s.py).

The schemas are vendored in tests/schemas/; README.md there names each one's
source, version and license, and its SHA-256 (checked below).
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import re
from pathlib import Path

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
SCHEMAS = ROOT / "tests" / "schemas"
K8S = ROOT / "deploy" / "k8s"
KUBERNETES_BUNDLE = "kubernetes-v1.33.0-strict.json"
CRDS = {("keda.sh/v1alpha1", "ScaledObject"): "keda-scaledobject-v1alpha1.json"}


@functools.cache
def load_schema(name: str) -> dict:
    """A vendored schema, checked against its meta-schema (once)."""
    schema = json.loads((SCHEMAS / name).read_text())
    jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator).check_schema(schema)
    return schema


def validator(schema: dict) -> jsonschema.protocols.Validator:
    return jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)(schema)


def problems(v: jsonschema.protocols.Validator, doc) -> list[str]:
    return [f"{e.json_path}: {e.message[:300]}" for e in v.iter_errors(doc)]


def kubernetes_validator(doc: dict) -> jsonschema.protocols.Validator:
    """The schema of a manifest's apiVersion and kind: a vendored CRD, or the
    Kubernetes bundle's definition named like kubernetes-json-schema's files
    (``deployment-apps-v1``, ``service-v1``, ``ingress-networking-v1``)."""
    crd = CRDS.get((doc["apiVersion"], doc["kind"]))
    if crd is not None:
        return validator(load_schema(crd))
    bundle = load_schema(KUBERNETES_BUNDLE)
    group, _, version = doc["apiVersion"].rpartition("/")
    name = "-".join(p for p in (doc["kind"].lower(), group.split(".")[0], version) if p)
    assert name in bundle["$defs"], (
        f"no vendored schema for {doc['apiVersion']} {doc['kind']}: add {name} to "
        f"tests/schemas/{KUBERNETES_BUNDLE} (see tests/schemas/README.md)")
    return validator({**bundle, "$ref": f"#/$defs/{name}"})


def k8s_documents() -> list[tuple[str, dict]]:
    out = []
    for path in sorted(K8S.rglob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                out.append((str(path.relative_to(ROOT)), doc))
    return out


# --- vendored schemas ---------------------------------------------------------------------
def test_vendored_schemas_are_the_documented_ones() -> None:
    """Every schema file is listed in tests/schemas/README.md with its SHA-256."""
    readme = (SCHEMAS / "README.md").read_text()
    listed = dict(re.findall(r"`([\w.-]+\.json)`[^\n]*?`([0-9a-f]{64})`", readme))
    files = {p.name for p in SCHEMAS.glob("*.json")}
    assert files and set(listed) == files, (sorted(listed), sorted(files))
    for name, digest in listed.items():
        assert hashlib.sha256((SCHEMAS / name).read_bytes()).hexdigest() == digest, name


# --- docker-compose.yml -------------------------------------------------------------------
@pytest.fixture(scope="module")
def compose_validator() -> jsonschema.protocols.Validator:
    return validator(load_schema("compose-spec.json"))


def test_compose_file_follows_the_compose_specification(compose_validator) -> None:
    doc = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert problems(compose_validator, doc) == []


def test_cluster_override_follows_the_compose_specification(compose_validator) -> None:
    """deploy/docker-compose.cluster.yml alone, and merged onto docker-compose.yml."""
    from tests.test_deploy_files import CLUSTER_COMPOSE, cluster_compose

    assert problems(compose_validator, yaml.safe_load(CLUSTER_COMPOSE.read_text())) == []
    assert problems(compose_validator, cluster_compose()) == []


@pytest.mark.parametrize(("mistake", "apply"), [
    ("unknown service key", lambda d: d["services"]["api"].update(restart_policy="always")),
    ("ports not a list", lambda d: d["services"]["api"].update(ports="8000:8000")),
    ("unknown depends_on condition",
     lambda d: d["services"]["api"]["depends_on"]["kafka"].update(condition="service_ready")),
    ("healthcheck test not a command", lambda d: d["services"]["redis"]["healthcheck"].update(test=1)),
    ("unknown top-level key", lambda d: d.update(service={})),
])
def test_compose_schema_catches_mistakes(compose_validator, mistake: str, apply) -> None:
    doc = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    apply(doc)
    assert problems(compose_validator, doc), f"the compose schema accepts: {mistake}"


# --- Prometheus ---------------------------------------------------------------------------
PROMETHEUS_FILES = [
    ("deploy/prometheus/prometheus.yml", "prometheus.json"),
    ("deploy/k8s/prometheus.yml", "prometheus.json"),
    ("deploy/prometheus/rules.yml", "prometheus.rules.json"),
]


@pytest.mark.parametrize(("path", "schema"), PROMETHEUS_FILES)
def test_prometheus_files_follow_their_schemas(path: str, schema: str) -> None:
    doc = yaml.safe_load((ROOT / path).read_text())
    assert problems(validator(load_schema(schema)), doc) == []


@pytest.mark.parametrize(("mistake", "apply"), [
    ("duration in words", lambda r: r.update({"for": "5 minutes"})),
    ("unknown rule key", lambda r: r.update(expression="up == 0")),
    ("label name with a dash", lambda r: r["labels"].update({"page-me": "yes"})),
])
def test_rules_schema_catches_mistakes(mistake: str, apply) -> None:
    doc = yaml.safe_load((ROOT / "deploy/prometheus/rules.yml").read_text())
    apply(doc["groups"][0]["rules"][0])
    assert problems(validator(load_schema("prometheus.rules.json")), doc), mistake


# --- Kubernetes ---------------------------------------------------------------------------
DOCS = k8s_documents()


def test_every_kind_the_issue_asks_for_is_there() -> None:
    kinds = {d["kind"] for _p, d in DOCS}
    assert {"Deployment", "Service", "Ingress", "ConfigMap", "Secret",
            "HorizontalPodAutoscaler", "ScaledObject"} <= kinds


@pytest.mark.parametrize(("path", "doc"), DOCS,
                         ids=[f"{p}:{d['kind']}/{d['metadata']['name']}" for p, d in DOCS])
def test_manifest_follows_the_kubernetes_schema(path: str, doc: dict) -> None:
    assert problems(kubernetes_validator(doc), doc) == []


def _doc(kind: str, name_part: str = "") -> dict:
    return copy.deepcopy(next(d for _p, d in DOCS
                              if d["kind"] == kind and name_part in d["metadata"]["name"]))


def _container(d: dict) -> dict:
    return d["spec"]["template"]["spec"]["containers"][0]


@pytest.mark.parametrize(("mistake", "kind", "apply"), [
    ("replicas as a word", "Deployment", lambda d: d["spec"].update(replicas="two")),
    ("misspelt probe field", "Deployment",
     lambda d: _container(d).update(readinessprobe=_container(d).pop("readinessProbe"))),
    ("unknown securityContext field", "Deployment",
     lambda d: _container(d)["securityContext"].update(runAsRoot=False)),
    ("wrong apiVersion for the kind", "Deployment", lambda d: d.update(apiVersion="apps/v2")),
    ("Service port as text", "Service", lambda d: d["spec"]["ports"][0].update(port="eighty")),
    ("Ingress backend without service", "Ingress",
     lambda d: d["spec"]["rules"][0]["http"]["paths"][0].update(backend={"serviceName": "x"})),
    ("ConfigMap value not a string", "ConfigMap", lambda d: d["data"].update(FLEETWATCH_X=3)),
    ("HPA metric unknown", "HorizontalPodAutoscaler",
     lambda d: d["spec"]["metrics"][0]["resource"]["target"].update(averageUtilisation=70)),
    ("ScaledObject misspelt field", "ScaledObject", lambda d: d["spec"].update(maxReplicas=3)),
    ("ScaledObject metadata value not a string", "ScaledObject",
     lambda d: d["spec"]["triggers"][0]["metadata"].update(lagThreshold=10)),
])
def test_kubernetes_schemas_catch_mistakes(mistake: str, kind: str, apply) -> None:
    doc = _doc(kind)
    apply(doc)
    try:
        v = kubernetes_validator(doc)
    except AssertionError:  # no schema for a wrong apiVersion: caught too
        return
    assert problems(v, doc), f"the schema accepts: {mistake}"


@pytest.mark.parametrize("path", sorted(K8S.rglob("kustomization.yaml")), ids=str)
def test_kustomization_follows_its_schema(path: Path) -> None:
    doc = yaml.safe_load(path.read_text())
    assert problems(validator(load_schema("kustomization.json")), doc) == []
