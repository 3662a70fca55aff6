"""benchmarks/fleet_scale.py: its projection's arithmetic, and a ``--quick --cluster`` run of
the real pipeline on one Redis and on a local Redis Cluster (a minute or two) whose JSON
holds every figure with plausible values."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "fleet_scale.py"


@pytest.fixture(scope="module")
def fleet_scale():
    sys.path.insert(0, str(SCRIPT.parent))  # its sibling modules (harness, workload)
    try:
        spec = importlib.util.spec_from_file_location("fleet_scale", SCRIPT)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses look their module up
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.path.remove(str(SCRIPT.parent))


def test_projection_grows_each_kind_by_its_retention(fleet_scale) -> None:
    """A window kind is kept for the window retention, a rollup for its own, a per-model key
    once; the profile-holding kinds scale with the profile's size at the fleet's records per
    window; processes follow the per-CPU-second rates at the planned utilisation."""
    from service.settings import Settings

    s = Settings()
    shape = fleet_scale.Shape(models=2, windows=10)
    fp = fleet_scale.Footprint(
        bytes={("window profiles", "window"): 20 * 1_000, ("results", "window"): 20 * 500,
               ("hourly rollups", "hour"): 2 * 4_000, ("configuration", "model"): 2 * 100,
               ("event streams", "fleet"): 300},
        keys={}, units={"window": 20, "hour": 2, "model": 1, "fleet": 1},
        used_memory=2 * (20 * 1_500 + 8_000 + 200 + 300), info={})
    tp = fleet_scale.Throughput(records=6_000, aggregator_cpu_s=0.1, ingest_wall_s=0.1, windows=20,
                                tests=2_000, detector_cpu_s=2.0, joiner_cpu_s=0.0, labels=0, wall_s=1.0)
    sizes = {300: 10_000, 3_000: 30_000, 3_600: 40_000, 36_000: 60_000}
    p = fleet_scale.project(fp, tp, s, shape, models=5_000, rate=50_000, replicas=1, sizes=sizes)
    windows_kept = s.retention_window_seconds / s.window_seconds
    assert p.records_per_window == 3_000
    assert p.per_model_bytes["window profiles"] == round(1_000 * windows_kept * 3.0)
    assert p.per_model_bytes["results"] == round(500 * windows_kept)
    assert p.per_model_bytes["hourly rollups"] == round(4_000 * s.retention_hourly_seconds / 3_600 * 1.5)
    assert p.per_model_bytes["configuration"] == 100
    assert p.fleet_bytes == 300 and p.overhead == 2.0
    memory = p.memory(0.0)
    data = 5_000 * sum(p.per_model_bytes.values()) + 300
    assert memory["dataset_gb"] == round(data / 1e9, 1)
    assert memory["with_replicas_gb"] == round(data * 2 * 2 / 1e9, 1)
    # 60,000 records per CPU-second at half a core: 50,000 / 30,000 -> 2 aggregators;
    # 16.7 windows/s at 10 windows per CPU-second, half used -> 4 detectors.
    assert (p.aggregators, p.detectors) == (2, 4)
    assert p.partitions % p.aggregators == 0 and p.partitions * 60_000 >= 5 * 50_000


@pytest.mark.integration  # starts a broker, Redis and the roles as child processes
@pytest.mark.timeout(900)  # the run's own timeout below
def test_quick_run_reports_every_figure() -> None:
    run = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--cluster"], cwd=ROOT,
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    windows = out["models"] * out["windows_per_model"]
    assert (out["models"], out["windows_per_model"], out["records_per_window"]) == (2, 7, 300)

    # On one Redis and on the cluster, every window went through the detector and every
    # label was joined; the same windows give the same tests.
    for where in ("standalone", "cluster"):
        tp = out[where]
        assert tp["windows_evaluated"] == windows, where
        assert tp["labels_joined"] == windows * 300, where
        assert tp["records"] == (windows + out["models"]) * 300, where  # and the closing window's
        assert tp["records_per_aggregator_cpu_s"] > 0 and tp["tests_per_detector_cpu_s"] > 0, where
    assert out["cluster"]["tests"] == out["standalone"]["tests"] > 0
    assert out["cluster_to_standalone_records_per_aggregator_cpu_s"] > 0
    assert out["cluster_to_standalone_windows_per_detector_cpu_s"] > 0

    # What the run stored, by kind: each kind the pipeline writes is there.
    by_kind = out["redis_bytes_per_model_window_by_kind"]
    for kind in ("window profiles", "hourly rollups", "daily rollups", "results", "alert state",
                 "cohorts", "label joins (predictions kept)", "FDR", "index keys",
                 "checkpoints (open windows)"):
        assert by_kind.get(kind, 0) > 0, kind
    assert abs(sum(by_kind.values()) - out["redis_bytes_per_model_window"]) <= len(by_kind)
    # A stored window profile is the profile of its 300 records (MEMORY USAGE adds the key's
    # few dozen bytes), and far below the profile benchmark's bound for 100,000 records
    # (benchmarks/profile_build.py: <= 100 KiB).
    profile = out["profile_bytes_by_records"]["300"]
    assert 0.8 * profile <= by_kind["window profiles"] <= 1.2 * profile + 200
    assert by_kind["window profiles"] < 100 * 1024
    assert out["redis_bytes_per_model_window"] < 20 * 100 * 1024
    assert out["redis_bytes_per_model_day"] > 288 * by_kind["window profiles"]
    assert 1.0 < out["redis_overhead_ratio"] < 3.0

    proj = out["projection"]
    assert proj["records_per_window"] == 3_000
    assert proj["retained_per_model"]["window"] == out["settings"]["retention_window_seconds"] / 300
    assert proj["aggregators"] >= 1 and proj["detectors"] >= 1 and proj["partitions"] >= proj["aggregators"]
    none, every = proj["memory_no_label_joins"], proj["memory_every_model_label_joined"]
    assert 0 < none["dataset_gb"] <= none["used_memory_gb"] < every["used_memory_gb"]
    assert none["with_replicas_gb"] == pytest.approx(2 * none["used_memory_gb"], abs=0.2)
