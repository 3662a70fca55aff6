"""The provisioned Grafana dashboard: parsed, laid out, provisioned where
docker-compose.yml mounts it, and every PromQL query naming only metrics (and
labels) the service really exports: service.metrics imported, prometheus_client's
registry read (counters as <name>_total, histograms as _bucket/_sum/_count).
With promtool on PATH the queries are also parsed by Prometheus itself.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.test_deploy_files import COMPOSE, DATASOURCE, exported_series
from tests.test_deploy_schemas import load_schema, problems, validator

ROOT = Path(__file__).resolve().parents[1]
DASHBOARDS = ROOT / "deploy" / "grafana" / "dashboards"
DASHBOARD = DASHBOARDS / "fleetwatch.json"
PROVIDER = ROOT / "deploy" / "grafana" / "provisioning" / "dashboards" / "fleetwatch.yml"
PROMETHEUS_SERIES = {"up"}  # series Prometheus itself makes, allowed besides the service's

KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or",
            "unless", "offset", "inf", "nan"}
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
_SELECTOR = re.compile(r"([A-Za-z_:][\w:]*)?\s*\{([^}]*)\}")
_MATCHER_LABEL = re.compile(r"([A-Za-z_]\w*)\s*(?:=~|!~|!=|=)")
_IDENT = re.compile(r"(?<![\w$:.])([A-Za-z_:][\w:]*)(?![\w:]|\s*\()")


def promql_metrics(expr: str) -> set[str]:
    """Metric names in a PromQL expression: identifiers that are not functions,
    keywords, label names (in selectors and grouping clauses) or durations.

    Examples
    --------
    >>> sorted(promql_metrics('sum by (reason) (rate(a_total{reason="x"}[5m])) / on(job) b or vector(0)'))
    ['a_total', 'b']
    >>> sorted(promql_metrics('histogram_quantile(0.9, sum by (le) (rate(h_bucket[$__range]))) > 1e3'))
    ['h_bucket']
    """
    e = _STRING.sub('""', expr)
    e = re.sub(r"\{[^}]*\}", " ", e)
    e = re.sub(r"\[[^\]]*\]", " ", e)
    e = _GROUPING.sub(" ", e)
    return {n for n in _IDENT.findall(e) if n.lower() not in KEYWORDS}


def promql_labels(expr: str) -> set[str]:
    """Label names used in selectors and grouping clauses.

    Examples
    --------
    >>> sorted(promql_labels('sum by (check, job) (x{reason!="a", le=~"1"})'))
    ['check', 'job', 'le', 'reason']
    """
    e = _STRING.sub('""', expr)
    labels = {lbl.strip() for g in _GROUPING.findall(e) for lbl in g.split(",") if lbl.strip()}
    for _metric, matchers in _SELECTOR.findall(e):
        labels |= set(_MATCHER_LABEL.findall(matchers))
    return labels


@pytest.fixture(scope="module")
def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


def panels(d: dict) -> list[dict]:
    out = []
    for p in d["panels"]:
        out.append(p)
        out += p.get("panels", [])  # collapsed rows hold their panels
    return out


def queries(d: dict) -> list[tuple[str, str]]:
    return [(p["title"], t["expr"]) for p in panels(d) for t in p.get("targets", [])]


def test_provisioning_mounts_the_dashboards(dashboard) -> None:
    compose = yaml.safe_load(COMPOSE.read_text())
    mounts = {}
    for v in compose["services"]["grafana"]["volumes"]:
        host, container = v.split(":")[:2]
        if host.startswith("."):
            mounts[container] = (ROOT / host).resolve()
    assert mounts["/etc/grafana/provisioning/dashboards"] == PROVIDER.parent.resolve()
    (provider,) = yaml.safe_load(PROVIDER.read_text())["providers"]
    assert provider["type"] == "file"
    assert mounts[provider["options"]["path"]] == DASHBOARDS.resolve()
    assert sorted(DASHBOARDS.glob("*.json")) == [DASHBOARD]


def test_dashboard_uses_the_provisioned_datasource(dashboard) -> None:
    (ds,) = yaml.safe_load(DATASOURCE.read_text())["datasources"]
    (var,) = [v for v in dashboard["templating"]["list"] if v["type"] == "datasource"]
    assert var["query"] == ds["type"] == "prometheus"
    assert var["current"]["value"] == ds["uid"]
    ref = {"type": "prometheus", "uid": "${" + var["name"] + "}"}
    for p in panels(dashboard):
        if p["type"] != "row":
            assert p["datasource"] == ref, p["title"]
            assert all(t["datasource"] == ref for t in p["targets"]), p["title"]


def test_dashboard_layout(dashboard) -> None:
    assert dashboard["uid"] and dashboard["title"]
    ps = panels(dashboard)
    assert len({p["id"] for p in ps}) == len(ps), "panel ids must be unique"
    cells = set()
    for p in ps:
        g = p["gridPos"]
        assert g["x"] >= 0 and g["x"] + g["w"] <= 24 and g["h"] >= 1, p["title"]
        area = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        assert not area & cells, f"{p['title']} overlaps another panel"
        cells |= area
        if p["type"] != "row":
            refs = [t["refId"] for t in p["targets"]]
            assert refs and len(set(refs)) == len(refs), p["title"]
            assert all(t["expr"].strip() for t in p["targets"]), p["title"]


def test_dashboard_follows_the_grafana_dashboard_schema(dashboard) -> None:
    assert problems(validator(load_schema("grafana-dashboard-5.x.json")), {"dashboard": dashboard}) == []


def test_queries_name_only_exported_metrics_and_labels(dashboard) -> None:
    exported = exported_series()
    used = set()
    for title, expr in queries(dashboard):
        names = promql_metrics(expr)
        assert names, f"{title}: no metric in {expr!r}"
        unknown = names - set(exported) - PROMETHEUS_SERIES
        assert not unknown, (f"{title}: {sorted(unknown)} not exported by service/metrics.py "
                             f"(counters are <name>_total; histograms _bucket/_sum/_count)")
        allowed = {"job", "instance"} | {lbl for n in names for lbl in exported.get(n, ())}
        assert promql_labels(expr) <= allowed, f"{title}: labels {promql_labels(expr) - allowed}"
        used |= names
    # What the dashboard is for (so this test cannot pass on an empty dashboard).
    assert used >= {
        "fleetwatch_records_consumed_total", "fleetwatch_records_dead_lettered_total",
        "fleetwatch_alerts_raised_total", "fleetwatch_consumer_lag_records",
        "fleetwatch_open_windows", "fleetwatch_checkpoint_duration_seconds_bucket",
        "fleetwatch_detector_window_duration_seconds_bucket", "fleetwatch_detector_windows_total",
        "fleetwatch_redis_errors_total",
    }


@pytest.mark.parametrize(("title", "metric", "by"), [
    ("Alerts fired by severity", "fleetwatch_alerts_raised_total", "severity"),
    ("Dead letters by reason", "fleetwatch_records_dead_lettered_total", "reason"),
    ("Consumer lag per partition", "fleetwatch_consumer_lag_records", "partition"),
    ("Checkpoint latency", "fleetwatch_checkpoint_duration_seconds_bucket", "le"),
    ("Detector run time per window", "fleetwatch_detector_window_duration_seconds_bucket", "le"),
])
def test_breakdown_panels(dashboard, title: str, metric: str, by: str) -> None:
    (p,) = [p for p in panels(dashboard) if p["title"] == title]
    exprs = [t["expr"] for t in p["targets"]]
    assert any(metric in promql_metrics(e) and by in promql_labels(e) for e in exprs), exprs


def test_query_checks_catch_a_wrong_name() -> None:
    """Guards the check above: a counter without _total, or a made-up label, is caught."""
    exported = exported_series()
    assert promql_metrics("rate(fleetwatch_records_consumed[5m])") - set(exported)
    assert "model" not in exported["fleetwatch_alerts_raised_total"]
    assert promql_labels("sum by (model) (fleetwatch_alerts_raised_total)") == {"model"}


@pytest.mark.integration  # promtool runs as a subprocess
@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool is not installed")
def test_promtool_parses_every_query(dashboard, tmp_path: Path) -> None:
    """Each query, with Grafana's interval variables filled in, as a recording rule:
    `promtool check rules` parses it with Prometheus' own PromQL parser."""
    rules = [{"record": f"fleetwatch_dashboard:q{i}",
              "expr": expr.replace("$__rate_interval", "1m").replace("$__range", "6h")}
             for i, (_title, expr) in enumerate(queries(dashboard))]
    (tmp_path / "queries.yml").write_text(yaml.safe_dump({"groups": [{"name": "q", "rules": rules}]}))
    run = subprocess.run([shutil.which("promtool"), "check", "rules", str(tmp_path / "queries.yml")],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
