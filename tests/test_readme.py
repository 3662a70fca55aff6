"""Every command of the README's "Using it" section, run in order in an empty folder, as a
reader would: the code blocks are read from README.md here, so the README cannot drift
from what works.

`fleetwatch run` is started in the background (the reader's first terminal); each other
``bash`` block runs in one shell whose environment carries over to the next block (the
reader's second terminal: ``. .fleetwatch/endpoints.env`` holds for what follows); each
``python`` block runs in its own interpreter with that environment. Between blocks the
test waits only where a reader waits ("seconds later"): after a block that flushes, until
the pipeline has evaluated every closed window of the model."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.running_service import fleetwatch_run, until

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCK = re.compile(r"^```(bash|python)\n(.*?)^```$", re.S | re.M)
ENV_MARK = "--fleetwatch-env-5b1e--"


def using_it() -> list[tuple[str, str]]:
    """The ``(language, code)`` blocks of the README's "Using it" section, in order."""
    text = README.read_text()
    start = text.index("\n## Using it\n")
    end = text.index("\n## ", start + 1)
    return BLOCK.findall(text[start:end])


def test_the_section_has_the_whole_workflow():
    code = "\n".join(c for _l, c in using_it())
    for step in ("fleetwatch run", ". .fleetwatch/endpoints.env", "register_model(", "upload_reference(",
                 "pd.DataFrame(", "log_prediction(", "fleetwatch status", "fleetwatch alerts list",
                 "fleetwatch alerts ack", "fleetwatch silence add model="):
        assert step in code, step
    assert [c for _l, c in using_it()].count("fleetwatch run\n") == 1


def run_bash(code: str, cwd: Path, env: dict[str, str]) -> tuple[str, dict[str, str]]:
    """``code`` in ``bash -e``; its output and the environment it leaves."""
    script = f"set -eo pipefail\n{code}\necho {ENV_MARK}\nenv -0\n"
    out = subprocess.run(["bash", "-c", script], cwd=cwd, env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, f"{code}\nexit {out.returncode}\n{out.stdout}\n{out.stderr}"
    shown, _, env_text = out.stdout.partition(ENV_MARK + "\n")
    return shown, dict(v.split("=", 1) for v in env_text.split("\0") if "=" in v)


def run_python(code: str, cwd: Path, env: dict[str, str]) -> str:
    out = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, f"{code}\nexit {out.returncode}\n{out.stdout}\n{out.stderr}"
    return out.stdout


def evaluated(api_url: str, model: str) -> bool:
    """Every closed window of ``model`` through the detector and the alert policy."""
    r = httpx.get(f"{api_url}/v1/models/{model}/status", timeout=10)
    if r.status_code != 200:
        return False
    w = r.json()["windows"]
    return w["open"] == 0 and w["closed"] > 0 and w["pending_policy"] == 0 and \
        w["evaluated"] + sum(w["skipped"].values()) == w["closed"]


@pytest.mark.integration  # starts `fleetwatch run`
@pytest.mark.timeout(900)
def test_every_command_of_using_it_runs(tmp_path):
    blocks = using_it()
    assert blocks[0] == ("bash", "fleetwatch run\n")
    folder = tmp_path / "workdir"
    folder.mkdir()
    # the reader's shell: the installed `fleetwatch` first on PATH, no FLEETWATCH_* of ours
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETWATCH_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    outputs = []
    with fleetwatch_run(folder / ".fleetwatch", cwd=folder) as run:
        for language, code in blocks[1:]:
            if language == "python":
                outputs.append(run_python(code, folder, env))
                continue
            shown, env = run_bash(code, folder, env)
            outputs.append(shown)
            for model in re.findall(r"^fleetwatch flush (\S+)$", code, re.M):
                until(lambda m=model: evaluated(run.api_url, m), 180, f"{model}'s windows evaluated")
        api = run.api_url
        status = httpx.get(f"{api}/v1/models/fraud-v2/status", timeout=10).json()
        alerts = httpx.get(f"{api}/v1/alerts", params={"model": "fraud-v2"}, timeout=10).json()
        silences = httpx.get(f"{api}/v1/silences", params={"state": "active"}, timeout=10).json()
    # what the reader saw
    assert "5000" in outputs[1] and "fraud-v2" in outputs[1]  # upload_reference's answer
    assert "3000 in evaluated windows" in "\n".join(outputs)  # fleetwatch status fraud-v2
    # and what the service did: every record aggregated, the unit change alerted and acknowledged
    assert status["records"]["in_evaluated_windows"] == 3_000
    assert status["baseline"]["last_used"] == "reference"
    amount = [a for a in alerts if a["feature"] == "amount"]
    assert amount and all(a["state"] == "acknowledged" for a in alerts if a["state"] != "resolved")
    assert all(a["ack_comment"] == "amounts in cents since 2.3" for a in amount if a.get("acked_by"))
    assert any(s["matchers"] == [{"name": "model", "value": "fraud-v2", "regex": False, "equal": True,
                                  "usable": True}] for s in silences), json.dumps(silences)
