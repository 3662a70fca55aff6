"""benchmarks/ingest_stages.py on a small workload: every record is counted once, in the
workload's windows, and the stages add up to the total it reports."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "ingest_stages.py"
STAGES = ("decode", "profile", "checkpoint", "close")


@pytest.mark.integration
def test_stages_add_up_to_the_total_over_every_record() -> None:
    run = subprocess.run([sys.executable, str(SCRIPT), "--models", "4", "--per-model", "600",
                          "--repeat", "2"], capture_output=True, text=True, timeout=300, check=True)
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert (result["records"], result["windows"], result["records_per_window"]) == (4_800, 4, 1_200)
    stages = [result[f"us_per_record_{s}"] for s in STAGES]
    assert all(v >= 0 for v in stages) and result["us_per_record_checkpoint"] == 0  # < 400,000 records
    assert result["us_per_record_total"] == pytest.approx(sum(stages), abs=0.03)
    assert result["records_per_cpu_s"] == pytest.approx(1e6 / result["us_per_record_total"], rel=0.02)
    assert result["stored_bytes_per_window"] > 1_000 and result["us_per_record_msgpack_reference"] > 0
