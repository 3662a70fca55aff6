"""Static checks of the deployment files, with no Docker engine: docker-compose.yml,
deploy/Dockerfile, .dockerignore, the Prometheus configuration and alert rules and
the Grafana datasource, each checked against what the service really does (its CLI
subcommands, settings, routes and exported metrics).

When ``promtool`` is on PATH the Prometheus files are also checked by it and the
alert rules are unit-tested with ``promtool test rules``.

Schema validation of these files and of deploy/k8s/ is in test_deploy_schemas.py;
deploy/k8s/ against the service in test_deploy_k8s.py; the Grafana dashboard in
test_deploy_grafana.py.
"""

from __future__ import annotations

import base64
import http.server
import json
import posixpath
import re
import shlex
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml  # noqa: E402

from service.runtime.roles import ROLES as REGISTRY

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = ROOT / "docker-compose.yml"
#: The Redis Cluster override: ``docker compose -f docker-compose.yml -f <it>``.
CLUSTER_COMPOSE = ROOT / "deploy" / "docker-compose.cluster.yml"
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
PROMETHEUS = ROOT / "deploy" / "prometheus" / "prometheus.yml"
RULES = ROOT / "deploy" / "prometheus" / "rules.yml"
DATASOURCE = ROOT / "deploy" / "grafana" / "provisioning" / "datasources" / "prometheus.yml"

#: Each role's sub-command, from the registry the CLI is built from.
ROLES = {r.name: r.command for r in REGISTRY.values()}
METRICS_PORT = "9100"
API_PORT = "8000"


# --- helpers ------------------------------------------------------------------------------
def load_yaml(path: Path):
    return yaml.safe_load(path.read_text())


def as_argv(command) -> list[str]:
    """A compose ``command`` / ``test`` (string or list) as an argv list."""
    return shlex.split(command) if isinstance(command, str) else [str(a) for a in command]


def env_of(service: dict) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {k: "" if v is None else str(v) for k, v in env.items()}


#: Compose keys whose sequence an override replaces instead of extending (the Compose
#: Specification's merge rules; other sequences are extended, mappings merged key by key).
REPLACED_SEQUENCES = frozenset({"command", "entrypoint", "test"})


def compose_merge(base, override, key: str | None = None):
    """``override`` merged onto ``base`` as ``docker compose -f base -f override`` merges
    them: mappings key by key, ``command`` / ``entrypoint`` / healthcheck ``test``
    replaced, other sequences extended by the entries they lack, scalars replaced."""
    if isinstance(base, dict) and isinstance(override, dict):
        return {k: compose_merge(base[k], v, k) if k in base else v for k, v in override.items()} | {
            k: v for k, v in base.items() if k not in override}
    if isinstance(base, list) and isinstance(override, list) and key not in REPLACED_SEQUENCES:
        return base + [v for v in override if v not in base]
    return override


def cluster_compose() -> dict:
    """docker-compose.yml with the Redis Cluster override applied."""
    return compose_merge(load_yaml(COMPOSE), load_yaml(CLUSTER_COMPOSE))


def dockerfile_instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, line continuations joined, comments dropped."""
    out, buf = [], ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            buf += line[:-1].strip() + " "
            continue
        buf += line
        keyword, _, args = buf.partition(" ")
        out.append((keyword.upper(), args.strip()))
        buf = ""
    return out


def stages(instructions: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    result: list[list[tuple[str, str]]] = []
    for ins in instructions:
        if ins[0] == "FROM":
            result.append([])
        if result:
            result[-1].append(ins)
    return result


def env_instruction(args: str) -> dict[str, str]:
    return dict(tok.split("=", 1) for tok in shlex.split(args))


def healthcheck_argv(args: str) -> tuple[str, list[str]]:
    options, sep, cmd = args.partition("CMD ")
    assert sep, f"HEALTHCHECK without CMD: {args}"
    return options, json.loads(cmd)


# --- fixtures -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def compose() -> dict:
    return load_yaml(COMPOSE)


@pytest.fixture(scope="module")
def services(compose: dict) -> dict:
    return compose["services"]


@pytest.fixture(scope="module")
def final_stage() -> list[tuple[str, str]]:
    return stages(dockerfile_instructions(DOCKERFILE.read_text()))[-1]


@pytest.fixture(scope="module")
def rules() -> list[dict]:
    return [r for g in load_yaml(RULES)["groups"] for r in g["rules"]]


def exported_series() -> dict[str, tuple[str, ...]]:
    """Sample name -> label names of every fleetwatch_* series the service can export
    (service.metrics imported, prometheus_client's default registry read)."""
    from prometheus_client import REGISTRY
    from prometheus_client.metrics import MetricWrapperBase

    import service.metrics as metrics

    suffixes = {
        "counter": ("_total", "_created"),
        "gauge": ("",),
        "histogram": ("_bucket", "_count", "_sum", "_created"),
        "summary": ("", "_count", "_sum", "_created"),
        "info": ("_info",),
    }
    names: dict[str, tuple[str, ...]] = {}
    labels_by_family = {
        m.describe()[0].name: tuple(getattr(m, "_labelnames", ()))
        for m in vars(metrics).values()
        if isinstance(m, MetricWrapperBase)
    }
    for family in REGISTRY.collect():
        if not family.name.startswith("fleetwatch_"):
            continue
        labels = labels_by_family.get(family.name, ())
        extra = ("le",) if family.type == "histogram" else ()
        for suffix in suffixes.get(family.type, ("",)):
            names[family.name + suffix] = labels + (extra if suffix == "_bucket" else ())
        for sample in family.samples:  # whatever the client really emits, too
            names.setdefault(sample.name, tuple(k for k in sample.labels))
    return names


@pytest.fixture(scope="module")
def exported() -> dict[str, tuple[str, ...]]:
    return exported_series()


# --- docker-compose.yml -------------------------------------------------------------------
def test_compose_has_every_service_and_no_version(compose: dict) -> None:
    assert "version" not in compose, "the compose specification has no top-level version"
    assert set(compose["services"]) >= {
        "kafka", "redis", "api", "aggregator", "detector", "prometheus", "grafana"
    }


@pytest.mark.parametrize(("name", "subcommand"), sorted(ROLES.items()))
def test_fleetwatch_service_builds_the_image_and_runs_its_role(
    services: dict, name: str, subcommand: str
) -> None:
    import typer.main

    from service.cli import app

    svc = services[name]
    build = svc["build"]
    assert build["dockerfile"] == "deploy/Dockerfile"
    assert (ROOT / build["context"] / build["dockerfile"]).resolve() == DOCKERFILE.resolve()
    assert as_argv(svc["command"]) == ["fleetwatch", subcommand]
    assert subcommand in typer.main.get_command(app).commands, "not a fleetwatch subcommand"
    for dep in ("kafka", "redis"):
        assert svc["depends_on"][dep]["condition"] == "service_healthy"
        assert "test" in services[dep]["healthcheck"], f"{dep} needs a healthcheck"


def test_fleetwatch_services_share_one_image(services: dict) -> None:
    images = {(services[n].get("image"), json.dumps(services[n]["build"], sort_keys=True))
              for n in ROLES}
    assert len(images) == 1, images


def test_fleetwatch_environment_is_valid_settings(services: dict) -> None:
    from service.settings import Settings

    for name in ROLES:
        # as compose interpolates them with the variables unset: ${VAR:-default} -> default
        values = {k.removeprefix("FLEETWATCH_").lower(): re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", str(v))
                  for k, v in env_of(services[name]).items() if k.startswith("FLEETWATCH_")}
        unknown = set(values) - set(Settings.model_fields)
        assert not unknown, f"{name}: FLEETWATCH_* variables that are no setting: {unknown}"
        settings = Settings(**values)  # validates types and ranges
        assert settings.kafka_bootstrap and settings.redis_url, name


def test_fleetwatch_endpoints_match_the_infrastructure(services: dict) -> None:
    kafka_env = env_of(services["kafka"])
    advertised = {urlsplit(u).netloc for u in kafka_env["KAFKA_ADVERTISED_LISTENERS"].split(",")}
    for name in ROLES:
        env = env_of(services[name])
        assert env["FLEETWATCH_KAFKA_BOOTSTRAP"] in advertised, name
        redis = urlsplit(env["FLEETWATCH_REDIS_URL"])
        assert redis.scheme == "redis" and redis.hostname in services, name
        assert env["FLEETWATCH_TOPIC_PARTITIONS"] == str(kafka_env["KAFKA_NUM_PARTITIONS"])

    api = env_of(services["api"])
    for name in ROLES:  # loopback by default: containers listen on every interface explicitly
        assert env_of(services[name])["FLEETWATCH_LISTEN_HOST"] == "0.0.0.0", name
    assert api["FLEETWATCH_API_PORT"] == API_PORT
    assert any(str(p).endswith(f":{API_PORT}") for p in services["api"]["ports"])

    for name in ("aggregator", "detector", "joiner", "notifier"):
        env = env_of(services[name])
        assert env["FLEETWATCH_METRICS_PORT"] == METRICS_PORT, name
        # The image's HEALTHCHECK targets the API; these roles have none.
        assert urlsplit(env["HEALTHCHECK_URL"]).port == int(METRICS_PORT), name
        assert "ports" not in services[name], f"{name} is replicated: publish no host port"
    assert services["aggregator"]["deploy"]["replicas"] >= 2


def test_redis_is_persistent(services: dict) -> None:
    redis = services["redis"]
    assert redis["image"].startswith("redis:7")
    argv = as_argv(redis["command"])
    assert argv[0] == "redis-server"
    assert argv[argv.index("--appendonly") + 1] == "yes"
    assert any(str(v).endswith(":/data") for v in redis["volumes"])
    assert as_argv(redis["healthcheck"]["test"])[-2:] == ["redis-cli", "ping"]


# --- deploy/docker-compose.cluster.yml ------------------------------------------------------
@pytest.fixture(scope="module")
def cluster_services() -> dict:
    return cluster_compose()["services"]


def test_compose_merge_follows_the_specification() -> None:
    base = {"command": ["a", "b"], "environment": {"X": "1", "Y": "2"}, "volumes": ["v:/data"],
            "depends_on": {"redis": {"condition": "service_healthy"}}}
    override = {"command": ["c"], "environment": {"Y": "3"}, "volumes": ["v:/data", "w:/w"],
                "depends_on": {"job": {"condition": "service_completed_successfully"}}}
    assert compose_merge(base, override) == {
        "command": ["c"], "environment": {"X": "1", "Y": "3"}, "volumes": ["v:/data", "w:/w"],
        "depends_on": {"redis": {"condition": "service_healthy"},
                       "job": {"condition": "service_completed_successfully"}}}


REDIS_NODES = ["redis", "redis-1", "redis-2", "redis-3", "redis-4", "redis-5"]


def test_cluster_override_runs_six_persistent_cluster_nodes(cluster_services: dict) -> None:
    """Three primaries with a replica each need six nodes; each keeps its own data (and its
    nodes.conf, the cluster's membership) in its own volume, with AOF and noeviction."""
    volumes = set()
    for name in REDIS_NODES:
        node = cluster_services[name]
        argv = as_argv(node["command"])
        assert node["image"].startswith("redis:7") and argv[0] == "redis-server", name
        assert argv[argv.index("--cluster-enabled") + 1] == "yes", name
        assert argv[argv.index("--appendonly") + 1] == "yes", name
        assert argv[argv.index("--maxmemory-policy") + 1] == "noeviction", name
        assert as_argv(node["healthcheck"]["test"])[-2:] == ["redis-cli", "ping"], name
        (volume,) = [v for v in node["volumes"] if str(v).endswith(":/data")]
        volumes.add(volume.split(":")[0])
    assert len(volumes) == len(REDIS_NODES)
    assert volumes <= set(cluster_compose()["volumes"])


def test_cluster_override_creates_the_cluster_once(cluster_services: dict) -> None:
    """The job waits for every node, creates three primaries with a replica each over all
    six, skips creation when the nodes already know each other (a restart), and ends only
    once the cluster serves every slot."""
    job = cluster_services["redis-cluster-create"]
    assert job["restart"] == "no"
    assert job["depends_on"] == {n: {"condition": "service_healthy"} for n in REDIS_NODES}
    script = as_argv(job["command"])[-1]
    assert "--cluster create" in script and "--cluster-replicas 1" in script and "--cluster-yes" in script
    assert re.search(r"for n in ([\w -]+); do", script)[1].split() == REDIS_NODES
    assert "cluster_known_nodes:6" in script and "cluster_state:ok" in script
    assert "$$" in script and not re.search(r"(?<!\$)\$(?!\$)", script), \
        "shell variables must be escaped ($$) from compose's interpolation"


@pytest.mark.parametrize("name", sorted(ROLES))
def test_cluster_override_puts_every_role_on_the_cluster(cluster_services: dict, name: str) -> None:
    from service.settings import Settings

    svc = cluster_services[name]
    assert svc["depends_on"]["redis-cluster-create"] == {"condition": "service_completed_successfully"}
    assert svc["depends_on"]["redis"]["condition"] == "service_healthy"
    values = {k.removeprefix("FLEETWATCH_").lower(): re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", v)
              for k, v in env_of(svc).items() if k.startswith("FLEETWATCH_")}
    settings = Settings(**values)
    assert settings.redis_cluster is True
    assert urlsplit(settings.redis_url).hostname in REDIS_NODES
    assert as_argv(svc["command"]) == ["fleetwatch", ROLES[name]]  # the base's, unchanged


def test_kafka_runs_kraft_single_node(services: dict) -> None:
    kafka = services["kafka"]
    env = env_of(kafka)
    assert kafka["image"].startswith("apache/kafka:")
    assert not any(k.startswith("KAFKA_ZOOKEEPER") for k in env), "KRaft: no ZooKeeper"
    assert set(env["KAFKA_PROCESS_ROLES"].split(",")) == {"broker", "controller"}
    voters = env["KAFKA_CONTROLLER_QUORUM_VOTERS"].split(",")
    assert voters == [f"{env['KAFKA_NODE_ID']}@kafka:9093"]
    controller = env["KAFKA_CONTROLLER_LISTENER_NAMES"]
    listeners = {u.split("://")[0]: u for u in env["KAFKA_LISTENERS"].split(",")}
    assert listeners[controller].endswith(":9093")
    protocols = dict(p.split(":") for p in env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"].split(","))
    assert set(listeners) <= set(protocols)
    assert controller not in env["KAFKA_ADVERTISED_LISTENERS"]
    for key in ("KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR",
                "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR"):
        assert str(env[key]) == "1", key
    cluster_id = env["CLUSTER_ID"]  # a base64url-encoded 16-byte UUID
    assert len(base64.urlsafe_b64decode(cluster_id + "=" * (-len(cluster_id) % 4))) == 16
    assert "kafka-broker-api-versions" in " ".join(as_argv(kafka["healthcheck"]["test"]))


def test_bind_mounts_exist(services: dict) -> None:
    for name, svc in services.items():
        for volume in svc.get("volumes", []):
            source = volume.split(":")[0] if isinstance(volume, str) else volume.get("source")
            if source.startswith("."):
                assert (ROOT / source).exists(), f"{name} mounts missing {source}"


# --- Prometheus ---------------------------------------------------------------------------
def _mounts(service: dict) -> dict[str, str]:
    """Container path -> host path (relative to the repository root) of bind mounts."""
    out = {}
    for v in service["volumes"]:
        parts = v.split(":")
        if parts[0].startswith("."):
            out[parts[1]] = parts[0]
    return out


def test_prometheus_scrapes_every_role(services: dict) -> None:
    config = load_yaml(PROMETHEUS)
    targets = set()
    for job in config["scrape_configs"]:
        assert job.get("metrics_path", "/metrics") == "/metrics"
        for sc in job.get("static_configs", []):
            targets.update(sc["targets"])
        for sd in job.get("dns_sd_configs", []):
            assert sd["type"] == "A"
            targets.update(f"{n}:{sd['port']}" for n in sd["names"])
    api_port = env_of(services["api"])["FLEETWATCH_API_PORT"]
    expected = {f"api:{api_port}"} | {
        f"{n}:{env_of(services[n])['FLEETWATCH_METRICS_PORT']}"
        for n in ("aggregator", "detector", "joiner", "notifier")
    }
    assert expected <= targets


def test_prometheus_mounts_config_and_rules(services: dict) -> None:
    mounts = _mounts(services["prometheus"])
    config_in_container = "/etc/prometheus/prometheus.yml"
    assert (ROOT / mounts[config_in_container]).resolve() == PROMETHEUS.resolve()
    rule_files = load_yaml(PROMETHEUS)["rule_files"]
    assert rule_files
    for rule_file in rule_files:
        # relative to the config file, both in the container and in the repository
        assert (PROMETHEUS.parent / rule_file).resolve() == RULES.resolve()
        in_container = posixpath.join(posixpath.dirname(config_in_container), rule_file)
        assert (ROOT / mounts[in_container]).resolve() == RULES.resolve()


def test_rules_are_well_formed(rules: list[dict]) -> None:
    names = [r["alert"] for r in rules]
    assert len(names) == len(set(names)), names
    for r in rules:
        assert r["expr"].strip(), r["alert"]
        assert r["labels"]["severity"] in {"critical", "warning"}, r["alert"]
        assert r["annotations"]["summary"], r["alert"]


METRIC = re.compile(r"\bfleetwatch_[A-Za-z0-9_:]*")
SELECTOR = re.compile(r"\b(fleetwatch_[A-Za-z0-9_:]*)\s*\{([^}]*)\}")
LABEL = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)")


def test_rule_metrics_are_exported_by_the_service(
    rules: list[dict], exported: dict[str, tuple[str, ...]]
) -> None:
    referenced = {m for r in rules for m in METRIC.findall(r["expr"])}
    # The rules cover the service's own health signals (so this test cannot pass empty).
    assert referenced >= {
        "fleetwatch_records_dead_lettered_total",
        "fleetwatch_records_consumed_total",
        "fleetwatch_redis_errors_total",
        "fleetwatch_detector_windows_total",
        "fleetwatch_open_windows",
    }
    missing = referenced - set(exported)
    assert not missing, (
        f"rules use metrics the service does not export: {sorted(missing)} "
        f"(counters are exposed as <name>_total)"
    )
    for r in rules:
        for metric, matchers in SELECTOR.findall(r["expr"]):
            unknown = set(LABEL.findall(matchers)) - set(exported[metric]) - {"job", "instance"}
            assert not unknown, f"{r['alert']}: {metric} has no label(s) {unknown}"


def test_exported_names_are_sample_names(exported: dict[str, tuple[str, ...]]) -> None:
    """Guards the comparison above: a counter is exported as ``<name>_total`` only."""
    assert "fleetwatch_records_consumed_total" in exported
    assert "fleetwatch_records_consumed" not in exported
    assert exported["fleetwatch_records_dead_lettered_total"] == ("reason",)
    assert "fleetwatch_open_windows" in exported


PROMTOOL = shutil.which("promtool")


def needs_promtool(test):
    """Skipped where promtool is not installed; an integration test where it is (it runs
    promtool as a subprocess)."""
    skip = pytest.mark.skipif(PROMTOOL is None, reason="promtool is not installed")
    return pytest.mark.integration(skip(test))


@needs_promtool
def test_promtool_accepts_config_and_rules() -> None:
    # --syntax-only: the scrape token file lives in the Prometheus container, not here
    # (the rules it names are checked on their own below)
    for args in (["check", "config", "--syntax-only", str(PROMETHEUS)], ["check", "rules", str(RULES)]):
        run = subprocess.run([PROMTOOL, *args], capture_output=True, text=True, timeout=60)
        assert run.returncode == 0, run.stdout + run.stderr


def _series(metric: str, values: str, job: str = "fleetwatch-aggregator", **labels) -> dict:
    labels = {"job": job, "instance": f"{job}:9100", **labels}
    body = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return {"series": f"{metric}{{{body}}}", "values": values}


# (alert, input series, evaluation time, expected alert labels or None for no alert)
RULE_CASES = [
    ("FleetwatchStoredConfigUnreadable",
     [_series("fleetwatch_config_errors_total", "0+1x60", role="aggregator", kind="model")],
     "30m", {"severity": "warning", "role": "aggregator", "kind": "model"}),
    ("FleetwatchStoredConfigUnreadable",
     [_series("fleetwatch_config_errors_total", "0x60", role="aggregator", kind="model")],
     "30m", None),
    ("FleetwatchImplicitModelsRefused",
     [_series("fleetwatch_implicit_models_total", "0+2x60", outcome="refused_total")],
     "30m", {"severity": "warning"}),
    ("FleetwatchImplicitModelsRefused",
     [_series("fleetwatch_implicit_models_total", "0+2x60", outcome="created")],
     "30m", None),
    ("FleetwatchDeadLetterRatioHigh",
     [_series("fleetwatch_records_consumed_total", "0+1000x60"),
      _series("fleetwatch_records_dead_lettered_total", "0+20x60", reason="invalid_record")],
     "30m", {"severity": "warning"}),
    ("FleetwatchDeadLetterRatioHigh",  # 0.5%: below the threshold
     [_series("fleetwatch_records_consumed_total", "0+1000x60"),
      _series("fleetwatch_records_dead_lettered_total", "0+5x60", reason="late")],
     "30m", None),
    ("FleetwatchDetectorStalled",
     [_series("fleetwatch_windows_closed_total", "0+1x60"),
      _series("fleetwatch_detector_windows_total", "0x60", job="fleetwatch-detector")],
     "30m", {"severity": "critical"}),
    ("FleetwatchDetectorStalled",  # windows skipped (no baseline) are handled, not stalled
     [_series("fleetwatch_windows_closed_total", "0+1x60"),
      _series("fleetwatch_detector_windows_total", "0x60", job="fleetwatch-detector"),
      _series("fleetwatch_detector_windows_skipped_total", "0+1x60", job="fleetwatch-detector",
              reason="no_baseline")],
     "30m", None),
    ("FleetwatchNoWindowsEvaluated",
     [_series("fleetwatch_records_consumed_total", "0+1000x60")],
     "40m", {"severity": "warning"}),
    ("FleetwatchNoWindowsEvaluated",
     [_series("fleetwatch_records_consumed_total", "0+1000x60"),
      _series("fleetwatch_detector_windows_total", "0+1x60", job="fleetwatch-detector")],
     "40m", None),
    ("FleetwatchRedisErrors",
     [_series("fleetwatch_redis_errors_total", "0+3x60")],
     "30m", {"severity": "warning", "job": "fleetwatch-aggregator",
             "instance": "fleetwatch-aggregator:9100"}),
    ("FleetwatchWindowsNotClosing",
     [_series("fleetwatch_open_windows", "12x90"),
      _series("fleetwatch_windows_closed_total", "0x90")],
     "30m", {"severity": "warning"}),
    ("FleetwatchTargetDown",
     [_series("up", "0x10", job="fleetwatch-api")],
     "5m", {"severity": "critical", "job": "fleetwatch-api",
            "instance": "fleetwatch-api:9100"}),
    ("FleetwatchAggregatorMissing",
     [_series("up", "1x20", job="fleetwatch-detector")],
     "10m", {"severity": "critical", "job": "fleetwatch-aggregator"}),
    ("FleetwatchAggregatorMissing",
     [_series("up", "1x20", job="fleetwatch-aggregator")],
     "10m", None),
    ("FleetwatchDetectorErrors",
     [_series("fleetwatch_detector_windows_skipped_total", "0 0 0 1 1 1 1 1 1 1 1 1",
              job="fleetwatch-detector", reason="error")],
     "10m", {"severity": "warning"}),
    ("FleetwatchNotifierMissing",
     [_series("up", "1x20", job="fleetwatch-detector")],
     "10m", {"severity": "critical", "job": "fleetwatch-notifier"}),
    ("FleetwatchNotificationsDeadLettered",
     [_series("fleetwatch_notifications_total", "0 0 0 1 1 1 1 1 1 1 1 1", job="fleetwatch-notifier",
              receiver_kind="pagerduty", outcome="dead")],
     "10m", {"severity": "warning", "receiver_kind": "pagerduty"}),
    ("FleetwatchNotificationsDeadLettered",  # retries are not failures
     [_series("fleetwatch_notifications_total", "0+1x12", job="fleetwatch-notifier",
              receiver_kind="pagerduty", outcome="retried")],
     "10m", None),
]


@needs_promtool
@pytest.mark.parametrize(("alert", "series", "at", "expected"), RULE_CASES,
                         ids=[f"{c[0]}-{'fires' if c[3] else 'quiet'}" for c in RULE_CASES])
def test_alert_rule_behaviour(tmp_path: Path, alert: str, series: list, at: str,
                              expected: dict | None) -> None:
    # promtool compares annotations too; test the expressions on a copy without them.
    doc = load_yaml(RULES)
    for group in doc["groups"]:
        for rule in group["rules"]:
            rule.pop("annotations", None)
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(doc))
    case = {
        "rule_files": ["rules.yml"],
        "evaluation_interval": "1m",
        "tests": [{
            "interval": "1m",
            "input_series": series,
            "alert_rule_test": [{
                "eval_time": at,
                "alertname": alert,
                "exp_alerts": [{"exp_labels": expected}] if expected else [],
            }],
        }],
    }
    (tmp_path / "case.yml").write_text(yaml.safe_dump(case))
    run = subprocess.run([PROMTOOL, "test", "rules", "case.yml"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr


# --- Dockerfile ---------------------------------------------------------------------------
def test_dockerfile_is_multi_stage_on_python_311_slim() -> None:
    text = DOCKERFILE.read_text()
    all_stages = stages(dockerfile_instructions(text))
    assert len(all_stages) >= 2
    args = dict(a.split("=", 1) for k, a in dockerfile_instructions(text) if k == "ARG" and "=" in a)

    def base(stage):
        image = stage[0][1].split()[0]
        return args.get(image.strip("${}"), image) if image.startswith("$") else image

    assert all(re.fullmatch(r"python:3\.11-slim(-\w+)?", base(s)) for s in all_stages)
    builder = " ".join(a for _k, a in all_stages[0])
    assert "[server]" in builder and "/opt/venv" in builder
    final = all_stages[-1]
    assert any(k == "COPY" and "--from=builder" in a and "/opt/venv" in a for k, a in final)


def test_dockerfile_runs_as_non_root(final_stage: list[tuple[str, str]]) -> None:
    users = [a for k, a in final_stage if k == "USER"]
    assert users, "the final stage sets no USER"
    user = users[-1].split(":")[0]
    assert user not in {"root", "0"}


def test_dockerfile_ports_command_and_environment(final_stage: list[tuple[str, str]]) -> None:
    exposed = {p.split("/")[0] for k, a in final_stage if k == "EXPOSE" for p in a.split()}
    assert {API_PORT, METRICS_PORT} <= exposed
    cmds = [json.loads(a) for k, a in final_stage if k == "CMD"]
    assert cmds[-1] == ["fleetwatch", "serve"]
    env = {}
    for k, a in final_stage:
        if k == "ENV":
            env.update(env_instruction(a))
    assert env["FLEETWATCH_LISTEN_HOST"] == "0.0.0.0"
    assert env.get("FLEETWATCH_API_PORT", API_PORT) == API_PORT
    assert env["PATH"].startswith("/opt/venv/bin:")


def test_dockerfile_healthcheck_uses_urllib_on_healthz(final_stage: list[tuple[str, str]]) -> None:
    checks = [a for k, a in final_stage if k == "HEALTHCHECK"]
    assert len(checks) == 1
    options, argv = healthcheck_argv(checks[0])
    assert "--interval=" in options and "--timeout=" in options
    assert argv[0].endswith("python") and argv[1] == "-c"
    assert "urllib" in argv[2] and "/healthz" in argv[2]
    assert "curl" not in checks[0] and "wget" not in checks[0]


def test_api_serves_the_probed_paths() -> None:
    from service.api.app import create_app
    from service.settings import Settings

    paths = {getattr(r, "path", None) for r in create_app(Settings()).routes}
    assert {"/healthz", "/metrics"} <= paths


class _Handler(http.server.BaseHTTPRequestHandler):
    status = 200
    paths: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        type(self).paths.append(self.path)
        self.send_response(type(self).status)
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args) -> None:
        pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.integration
@pytest.mark.parametrize(("status", "healthy"), [(200, True), (503, False), (None, False)])
def test_healthcheck_command_exit_code(final_stage, monkeypatch, status, healthy) -> None:
    """Runs the HEALTHCHECK command (with this interpreter) against a local server:
    healthy on 200, unhealthy on 503 or a refused connection."""
    _options, argv = healthcheck_argv(next(a for k, a in final_stage if k == "HEALTHCHECK"))
    handler = type("Handler", (_Handler,), {"status": status or 200, "paths": []})
    server = None
    if status is None:
        port = _free_port()  # nothing listens there
    else:
        server = http.server.HTTPServer(("127.0.0.1", 0), handler)
        port = server.server_address[1]
        threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.delenv("HEALTHCHECK_URL", raising=False)
        monkeypatch.setenv("FLEETWATCH_API_PORT", str(port))
        run = subprocess.run([sys.executable, *argv[1:]], capture_output=True, timeout=30)
    finally:
        if server is not None:
            server.shutdown()
            server.server_close()
    assert (run.returncode == 0) is healthy, run.stderr.decode()
    if status is not None:
        assert handler.paths == ["/healthz"]


@pytest.mark.integration
def test_healthcheck_command_follows_healthcheck_url(final_stage, monkeypatch) -> None:
    _options, argv = healthcheck_argv(next(a for k, a in final_stage if k == "HEALTHCHECK"))
    handler = type("Handler", (_Handler,), {"status": 200, "paths": []})
    server = http.server.HTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv("HEALTHCHECK_URL", f"http://127.0.0.1:{server.server_address[1]}/metrics")
        monkeypatch.setenv("FLEETWATCH_API_PORT", str(_free_port()))
        run = subprocess.run([sys.executable, *argv[1:]], capture_output=True, timeout=30)
    finally:
        server.shutdown()
        server.server_close()
    assert run.returncode == 0, run.stderr.decode()
    assert handler.paths == ["/metrics"]


def test_dockerignore_keeps_local_state_out_of_the_context() -> None:
    patterns = {line.strip().rstrip("/") for line in DOCKERIGNORE.read_text().splitlines()
                if line.strip() and not line.startswith("#")}
    assert {".venv", ".git", ".fleetwatch"} <= patterns
    assert any("__pycache__" in p for p in patterns)
    assert any("pytest_cache" in p for p in patterns)


# --- Grafana ------------------------------------------------------------------------------
def test_grafana_provisions_the_prometheus_datasource(services: dict) -> None:
    doc = load_yaml(DATASOURCE)
    assert doc["apiVersion"] == 1
    (ds,) = doc["datasources"]
    assert ds["type"] == "prometheus" and ds["isDefault"] is True
    url = urlsplit(ds["url"])
    assert url.hostname == "prometheus" and url.hostname in services
    assert any(str(p).endswith(f":{url.port}") for p in services["prometheus"]["ports"])
    mounts = _mounts(services["grafana"])
    host_dir = mounts["/etc/grafana/provisioning/datasources"]
    assert (ROOT / host_dir).resolve() == DATASOURCE.parent.resolve()
