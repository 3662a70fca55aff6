"""deploy/k8s/ against what the service really does: its settings, CLI
subcommands, routes, ports and image user; and the manifests against each other
(selectors, Service and Ingress ports, autoscaler targets, the KEDA trigger and
the ConfigMap, Prometheus job names). Schema validation is in
tests/test_deploy_schemas.py.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.test_deploy_files import (
    DOCKERFILE,
    PROMETHEUS,
    ROLES,
    RULES,
    dockerfile_instructions,
    env_instruction,
    stages,
)

ROOT = Path(__file__).resolve().parents[1]
K8S = ROOT / "deploy" / "k8s"
BASE = K8S / "base"
KEDA = K8S / "keda"
REDIS_CLUSTER = K8S / "overlays" / "redis-cluster"


def load_all(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def kustomization(folder: Path) -> dict:
    return yaml.safe_load((folder / "kustomization.yaml").read_text())


@pytest.fixture(scope="module")
def docs() -> list[dict]:
    """The base's manifests and the KEDA overlay's additions."""
    out = [d for r in kustomization(BASE)["resources"] for d in load_all(BASE / r)]
    out += [d for r in kustomization(KEDA)["resources"] if r != "../base" for d in load_all(KEDA / r)]
    return out


def patched(docs: list[dict], folder: Path) -> list[dict]:
    """``docs`` with an overlay's strategic-merge patches of ConfigMaps and Secrets applied
    (their ``data`` / ``stringData`` keys added or replaced, as kustomize merges maps)."""
    patches = {(d["kind"], d["metadata"]["name"]): d
               for p in kustomization(folder)["patches"] for d in load_all(folder / p["path"])}
    assert {kind for kind, _ in patches} <= {"ConfigMap", "Secret"}
    out = []
    for d in docs:
        patch = patches.pop((d["kind"], d["metadata"]["name"]), None)
        if patch is not None:
            d = {**d, **{k: {**d.get(k, {}), **patch[k]} for k in ("data", "stringData") if k in patch}}
        out.append(d)
    assert not patches, f"patches of nothing in the base: {sorted(patches)}"
    return out


def one(docs: list[dict], kind: str, name: str) -> dict:
    (doc,) = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    return doc


def environment_of(docs: list[dict]) -> dict[str, str]:
    """FLEETWATCH_* environment of every pod: the ConfigMap and the Secret."""
    cm = one(docs, "ConfigMap", "fleetwatch-config")["data"]
    secret = one(docs, "Secret", "fleetwatch-secrets")["stringData"]
    assert not set(cm) & set(secret)
    return {**cm, **secret}


@pytest.fixture(scope="module")
def config(docs) -> dict[str, str]:
    return environment_of(docs)


@pytest.fixture(scope="module")
def cluster_config(docs) -> dict[str, str]:
    """The same with the Redis Cluster overlay (overlays/redis-cluster)."""
    return environment_of(patched(docs, REDIS_CLUSTER))


def deployment(docs, role: str) -> dict:
    return one(docs, "Deployment", f"fleetwatch-{role}")


def container(docs, role: str) -> dict:
    (c,) = deployment(docs, role)["spec"]["template"]["spec"]["containers"]
    return c


def port(c: dict, name: str) -> int:
    (p,) = [p for p in c["ports"] if p["name"] == name]
    return p["containerPort"]


# --- kustomizations -----------------------------------------------------------------------
def manifests_in(folder: Path) -> set[str]:
    return {p.name for p in folder.glob("*.yaml")} - {"kustomization.yaml"}


def test_kustomization_lists_every_manifest() -> None:
    base = kustomization(BASE)
    assert set(base["resources"]) == manifests_in(BASE)
    assert kustomization(K8S)["resources"] == ["base"]  # `kubectl apply -k deploy/k8s`
    assert manifests_in(K8S) == set()  # an overlay may not sit in its base's folder
    keda = kustomization(KEDA)
    assert "../base" in keda["resources"]
    assert set(keda["resources"]) - {"../base"} == manifests_in(KEDA)
    cluster = kustomization(REDIS_CLUSTER)
    assert cluster["resources"] == ["../../base"]
    assert {p["path"] for p in cluster["patches"]} == manifests_in(REDIS_CLUSTER)
    assert base["namespace"] == keda["namespace"] == cluster["namespace"] == "fleetwatch"


KUSTOMIZE = shutil.which("kustomize") or shutil.which("kubectl")


def kustomize_build(folder: Path) -> list[dict]:
    argv = [KUSTOMIZE, "build", str(folder)] if KUSTOMIZE.endswith("kustomize") else [
        KUSTOMIZE, "kustomize", str(folder)]
    run = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    return [d for d in yaml.safe_load_all(run.stdout) if d]


def names(docs: list[dict]) -> set[tuple[str, str]]:
    return {(d["kind"], d["metadata"]["name"]) for d in docs}


@pytest.mark.integration  # kustomize runs as a subprocess
@pytest.mark.skipif(KUSTOMIZE is None, reason="neither kustomize nor kubectl is installed")
def test_kustomize_builds_the_base_and_every_overlay(docs) -> None:
    """What these tests read from the files is what kustomize builds: the base, the KEDA
    overlay (the base plus its ScaledObject) and the Redis Cluster overlay (the base with
    its ConfigMap and Secret patched, nothing else changed)."""
    base = [d for d in docs if d["kind"] != "ScaledObject"]
    built = kustomize_build(K8S)
    assert names(built) == names(base)
    assert names(kustomize_build(KEDA)) == names(docs)
    cluster = kustomize_build(REDIS_CLUSTER)
    assert names(cluster) == names(base)
    assert environment_of(cluster) == environment_of(patched(base, REDIS_CLUSTER))
    def unpatched(docs: list[dict]) -> list[dict]:
        return [d for d in docs if d["kind"] not in ("ConfigMap", "Secret")]

    assert unpatched(cluster) == unpatched(built)


def test_image_is_the_one_kustomize_sets(docs) -> None:
    (image,) = kustomization(BASE)["images"]
    for role in ROLES:
        assert container(docs, role)["image"] == image["name"], role


# --- settings -------------------------------------------------------------------------------
def test_configmap_and_secret_are_valid_settings(config) -> None:
    from service.settings import Settings

    values = {k.removeprefix("FLEETWATCH_").lower(): v for k, v in config.items()}
    assert all(k.startswith("FLEETWATCH_") for k in config)
    unknown = set(values) - set(Settings.model_fields)
    assert not unknown, f"FLEETWATCH_* variables that are no setting: {unknown}"
    settings = Settings(**values)  # validates types and ranges
    assert settings.kafka_bootstrap and settings.redis_url.startswith("redis")
    assert settings.listen_host == "0.0.0.0" and settings.metrics_port > 0


def test_redis_cluster_overlay_points_every_role_at_a_cluster(config, cluster_config) -> None:
    """The overlay changes the Redis settings only: the URL (in the Secret) names a node of
    a cluster, and FLEETWATCH_REDIS_CLUSTER is on; the settings stay valid."""
    from service.settings import Settings

    changed = {k for k in cluster_config if cluster_config[k] != config.get(k)}
    assert changed == {"FLEETWATCH_REDIS_CLUSTER", "FLEETWATCH_REDIS_URL"}
    settings = Settings(**{k.removeprefix("FLEETWATCH_").lower(): v for k, v in cluster_config.items()})
    assert settings.redis_cluster is True
    assert settings.redis_url.split("://")[0] in ("redis", "rediss")
    assert settings.redis_url.endswith("/0"), "a Redis Cluster has only database 0"


def test_redis_url_is_in_the_secret_not_the_configmap(docs) -> None:
    assert "FLEETWATCH_REDIS_URL" in one(docs, "Secret", "fleetwatch-secrets")["stringData"]
    assert "FLEETWATCH_REDIS_URL" not in one(docs, "ConfigMap", "fleetwatch-config")["data"]


@pytest.mark.parametrize("role", sorted(ROLES))
def test_every_role_reads_the_configmap_and_secret(docs, role: str) -> None:
    refs = container(docs, role)["envFrom"]
    assert {"configMapRef": {"name": "fleetwatch-config"}} in refs
    assert {"secretRef": {"name": "fleetwatch-secrets"}} in refs


# --- roles, probes, ports -------------------------------------------------------------------
@pytest.mark.parametrize(("role", "subcommand"), sorted(ROLES.items()))
def test_every_role_runs_its_subcommand(docs, role: str, subcommand: str) -> None:
    import typer.main

    from service.cli import app

    assert container(docs, role)["command"] == ["fleetwatch", subcommand]
    assert subcommand in typer.main.get_command(app).commands
    labels = deployment(docs, role)["spec"]["template"]["metadata"]["labels"]
    assert labels["app.kubernetes.io/component"] == role


def _app_paths() -> set[str]:
    from service.api.app import create_app
    from service.settings import Settings

    app = create_app(Settings())
    # The OpenAPI document lists the routers' paths; app.routes adds /docs, /openapi.json.
    return set(app.openapi()["paths"]) | {r.path for r in app.routes if getattr(r, "path", None)}


def test_api_probes(docs, config) -> None:
    c = container(docs, "api")
    assert port(c, "http") == int(config["FLEETWATCH_API_PORT"])
    ready, live = c["readinessProbe"]["httpGet"], c["livenessProbe"]["httpGet"]
    # Readiness follows Redis (/healthz: 503 without it); liveness does not, so a
    # Redis outage takes the API out of the Service without restart storms.
    assert ready == {"path": "/healthz", "port": "http"}
    assert live["port"] == "http" and live["path"] != "/healthz"
    assert {ready["path"], live["path"]} <= _app_paths()
    annotations = deployment(docs, "api")["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/port"] == config["FLEETWATCH_API_PORT"]


@pytest.mark.parametrize("role", ["aggregator", "detector"])
def test_worker_probes_use_the_metrics_port(docs, config, role: str) -> None:
    c = container(docs, role)
    assert port(c, "metrics") == int(config["FLEETWATCH_METRICS_PORT"])
    # `aggregate`/`detect` serve /metrics on FLEETWATCH_METRICS_PORT (tests/test_runtime_scale_out.py
    # reads it from such processes).
    for probe in ("readinessProbe", "livenessProbe"):
        assert c[probe]["httpGet"] == {"path": "/metrics", "port": "metrics"}, probe
    annotations = deployment(docs, role)["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/port"] == config["FLEETWATCH_METRICS_PORT"]


def test_aggregator_has_time_to_drain(docs) -> None:
    spec = deployment(docs, "aggregator")["spec"]["template"]["spec"]
    assert spec["terminationGracePeriodSeconds"] >= 30


# --- security and resources -----------------------------------------------------------------
def _image_uid() -> int:
    final = stages(dockerfile_instructions(DOCKERFILE.read_text()))[-1]
    user = [a for k, a in final if k == "USER"][-1]
    return int(user.split(":")[0])


@pytest.mark.parametrize("role", sorted(ROLES))
def test_pods_run_as_the_image_user_without_privileges(docs, role: str) -> None:
    """The "restricted" Pod Security Standard, which namespace.yaml enforces."""
    pod = deployment(docs, role)["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == _image_uid()
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["automountServiceAccountToken"] is False
    assert pod["serviceAccountName"] == "fleetwatch"
    sc = container(docs, role)["securityContext"]
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert sc["readOnlyRootFilesystem"] is True
    assert {v["name"] for v in pod["volumes"]} == {m["name"] for m in container(docs, role)["volumeMounts"]}
    assert all(set(v) <= {"name", "emptyDir"} for v in pod["volumes"])


@pytest.mark.parametrize("role", sorted(ROLES))
def test_compiled_code_is_cached_on_a_writable_volume(docs, role: str) -> None:
    """The image's NUMBA_CACHE_DIR lies on an emptyDir of every role: with a read-only root file
    system, the compiled t-digest compression would otherwise be compiled at every start."""
    final = stages(dockerfile_instructions(DOCKERFILE.read_text()))[-1]
    env: dict[str, str] = {}
    for k, a in final:
        if k == "ENV":
            env.update(env_instruction(a))
    cache = Path(env["NUMBA_CACHE_DIR"])
    mounts = [Path(m["mountPath"]) for m in container(docs, role)["volumeMounts"]]
    assert any(cache.is_relative_to(m) for m in mounts), (cache, mounts)


def test_namespace_enforces_the_restricted_standard(docs) -> None:
    ns = one(docs, "Namespace", "fleetwatch")
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


_UNITS = {"": 1, "m": 1e-3, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30}


def quantity(q) -> float:
    number, unit = re.fullmatch(r"([0-9.]+)([A-Za-z]*)", str(q)).groups()
    return float(number) * _UNITS[unit]


@pytest.mark.parametrize("role", sorted(ROLES))
def test_resources_are_requested_and_memory_is_limited(docs, role: str) -> None:
    res = container(docs, role)["resources"]
    assert {"cpu", "memory"} <= set(res["requests"])
    assert quantity(res["requests"]["memory"]) <= quantity(res["limits"]["memory"])
    # No CPU limit: throttling an aggregator only grows lag.
    assert "cpu" not in res["limits"]


# --- Service, Ingress, autoscaling, disruption budgets --------------------------------------
def _selects(selector: dict, labels: dict) -> bool:
    return selector.items() <= labels.items()


def test_api_service_and_ingress_route_to_the_api_pods(docs) -> None:
    svc = one(docs, "Service", "fleetwatch-api")
    pod_labels = deployment(docs, "api")["spec"]["template"]["metadata"]["labels"]
    assert _selects(svc["spec"]["selector"], pod_labels)
    for role in ("aggregator", "detector"):
        other = deployment(docs, role)["spec"]["template"]["metadata"]["labels"]
        assert not _selects(svc["spec"]["selector"], other), role
    (svc_port,) = svc["spec"]["ports"]
    assert svc_port["targetPort"] == "http" and port(container(docs, "api"), "http")

    ingress = one(docs, "Ingress", "fleetwatch-api")
    paths = [p for rule in ingress["spec"]["rules"] for p in rule["http"]["paths"]]
    app_paths = _app_paths()
    for p in paths:
        backend = p["backend"]["service"]
        assert backend["name"] == svc["metadata"]["name"]
        assert backend["port"] == {"name": svc_port["name"]}
        if p["pathType"] == "Exact":
            assert p["path"] in app_paths, p["path"]
        else:
            assert any(a.startswith(p["path"]) for a in app_paths), p["path"]
    assert "/metrics" not in {p["path"] for p in paths}, "metrics are scraped from pods, not published"
    assert any(p["path"] == "/v1" for p in paths)


def test_selectors_match_their_pods(docs) -> None:
    for d in docs:
        if d["kind"] == "Deployment":
            assert _selects(d["spec"]["selector"]["matchLabels"], d["spec"]["template"]["metadata"]["labels"])
        if d["kind"] == "PodDisruptionBudget":
            role = d["metadata"]["name"].removeprefix("fleetwatch-")
            labels = deployment(docs, role)["spec"]["template"]["metadata"]["labels"]
            assert _selects(d["spec"]["selector"]["matchLabels"], labels), d["metadata"]["name"]


def test_autoscalers_target_deployments_one_each(docs) -> None:
    targets = []
    for d in docs:
        if d["kind"] == "HorizontalPodAutoscaler":
            ref = d["spec"]["scaleTargetRef"]
            assert (ref["apiVersion"], ref["kind"]) == ("apps/v1", "Deployment")
            targets.append(ref["name"])
            assert d["spec"]["minReplicas"] <= d["spec"]["maxReplicas"]
        if d["kind"] == "ScaledObject":  # KEDA creates an HPA for its target
            targets.append(d["spec"]["scaleTargetRef"]["name"])
    assert sorted(targets) == sorted(f"fleetwatch-{r}" for r in ROLES)  # two autoscalers on one target fight
    for name in targets:
        one(docs, "Deployment", name)


def test_keda_scales_aggregators_on_their_consumer_group_lag(docs, config) -> None:
    so = one(docs, "ScaledObject", "fleetwatch-aggregator")
    assert so["spec"]["scaleTargetRef"]["name"] == deployment(docs, "aggregator")["metadata"]["name"]
    (trigger,) = so["spec"]["triggers"]
    assert trigger["type"] == "kafka"
    meta = trigger["metadata"]
    assert meta["bootstrapServers"] == config["FLEETWATCH_KAFKA_BOOTSTRAP"]
    assert meta["consumerGroup"] == config["FLEETWATCH_AGGREGATOR_GROUP"]
    assert meta["topic"] == config["FLEETWATCH_PREDICTIONS_TOPIC"]
    assert meta["offsetResetPolicy"] == "earliest"  # the aggregator's auto_offset_reset
    assert meta["allowIdleConsumers"] == "false"
    # Replicas beyond the partition count would idle.
    assert 1 <= so["spec"]["minReplicaCount"] <= so["spec"]["maxReplicaCount"]
    assert so["spec"]["maxReplicaCount"] <= int(config["FLEETWATCH_TOPIC_PARTITIONS"])
    # Offsets are committed once per checkpoint: a healthy group lags by about one
    # checkpoint interval of ingest. The threshold must exceed that at a replica's
    # full rate (~30k records/s measured, docs/operations.md), or KEDA never scales down.
    interval = float(config["FLEETWATCH_CHECKPOINT_INTERVAL_SECONDS"])
    assert int(meta["lagThreshold"]) >= 2 * 30_000 * interval


# --- Prometheus in the cluster --------------------------------------------------------------
K8S_PROMETHEUS = K8S / "prometheus.yml"


def test_cluster_prometheus_uses_the_compose_job_names(docs) -> None:
    """rules.yml and the dashboard name jobs fleetwatch-<role>: the relabelling must
    produce the same names as deploy/prometheus/prometheus.yml."""
    (job,) = yaml.safe_load(K8S_PROMETHEUS.read_text())["scrape_configs"]
    relabel = {r.get("target_label"): r for r in job["relabel_configs"]}
    rule = relabel["job"]
    assert rule["source_labels"] == ["__meta_kubernetes_pod_label_app_kubernetes_io_component"]
    made = {re.sub(r"\$1", role, rule["replacement"]) for role in ROLES
            if re.fullmatch(rule["regex"], role)}
    compose_jobs = {j["job_name"] for j in yaml.safe_load(PROMETHEUS.read_text())["scrape_configs"]}
    assert made == compose_jobs - {"prometheus"}
    keep_ports = next(r for r in job["relabel_configs"]
                      if r["source_labels"] == ["__meta_kubernetes_pod_container_port_name"])
    for role in ROLES:
        names = [p["name"] for p in container(docs, role)["ports"]]
        assert any(re.fullmatch(keep_ports["regex"], n) for n in names), role
        assert deployment(docs, role)["spec"]["template"]["metadata"]["annotations"][
            "prometheus.io/scrape"] == "true"


@pytest.mark.integration  # promtool runs as a subprocess
@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool is not installed")
def test_promtool_accepts_the_cluster_prometheus_config(tmp_path: Path) -> None:
    shutil.copy(K8S_PROMETHEUS, tmp_path / "prometheus.yml")
    shutil.copy(RULES, tmp_path / "rules.yml")
    run = subprocess.run([shutil.which("promtool"), "check", "config", str(tmp_path / "prometheus.yml")],
                         capture_output=True, text=True, timeout=60)
    if "kubernetes_sd_configs not found" in run.stdout + run.stderr:
        pytest.skip("this promtool is built without Kubernetes service discovery (Debian's is)")
    assert run.returncode == 0, run.stdout + run.stderr
