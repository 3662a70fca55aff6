"""The demo, end to end on its own embedded broker and Redis: the injected fault
breaches in the window where it starts and pages at that window's close (a 35 %
null rate against a 0.1 floor is a data-quality break: no k-of-m wait), for
every model that uses the feed, as one incident naming the
feed; the precision policy raises a fraction of what a naive per-window policy
raises on the same windows."""

from __future__ import annotations

import json

import pytest

from service.demo.run import FAULT, run_demo
from service.settings import Settings

pytestmark = pytest.mark.integration  # runs the demo on an embedded broker and Redis


def test_demo_detects_the_weather_feed_fault_as_one_incident(tmp_path, capsys):
    report = run_demo(Settings(), tmp_path / "demo.json")
    assert json.loads((tmp_path / "demo.json").read_text())["detection"] == report["detection"]
    assert report["records_dropped_by_sdk"] == 0
    assert sum(m["records"] for m in report["models"]) == report["records_produced"] > 40_000
    affected = {m["model_id"] for m in report["models"] if m["uses_weather"]}
    assert set(report["detection"]) == affected and len(affected) == 4
    for d in report["detection"].values():
        # every affected model pages at the close of the first faulty day (12 h after the
        # fault's start), whatever order the replay's windows are gated in
        assert d is not None and d["first_breach_window"] == d["first_alert_window"] == "2013-03-04"
        assert d["event_time_hours_from_fault"] == 12.0
    fault_checks = {(a["feature"], a["check"]) for a in report["fault_alerts"]}
    assert ("visib", "null_rate") in fault_checks
    [incident] = report["fault_incidents"]
    assert incident["group_key"] == "source:weather_feed" and set(incident["models"]) == affected
    assert len(report["other_alerts"]) * 10 < report["naive_alerts"]
    # No null-rate alert on visib outside the fault: the data-quality check is precise.
    assert not [a for a in report["other_alerts"]
                if a["feature"] == FAULT.null_feature and a["check"] == "null_rate"]
    # Models that do not use the weather feed see no alert on it.
    assert not [a for a in report["other_alerts"] + report["fault_alerts"]
                if a["model_id"] not in affected and a["feature"] in FAULT.features]
    assert "time from fault start to first alert" in capsys.readouterr().out
