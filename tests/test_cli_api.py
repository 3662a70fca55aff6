"""The command line over the API (`fleetwatch models|reference|alerts|incidents|silence|status|
flush`), run against a real `fleetwatch run` with API keys required: every command, its
table and its JSON, and its errors (unknown model, bad matcher, unknown column, a read-only
key acting) as a message and a non-zero exit."""

from __future__ import annotations

import json
import re
import time
from datetime import datetime

import httpx
import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from sdk import Client, register_model
from service.cli import app
from tests.running_service import fleetwatch_run, until

ADMIN = "a" * 40
MODEL = "shop"
WINDOW = 300
pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]  # starts `fleetwatch run`


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    """`fleetwatch run` with API keys required; yields (running, read key, write key)."""
    data_dir = tmp_path_factory.mktemp("cli") / "data"
    with fleetwatch_run(data_dir, FLEETWATCH_API_AUTH="true", FLEETWATCH_API_ADMIN_KEY=ADMIN) as run:
        keys = {}
        for scope in ("read", "write"):
            made = CliRunner().invoke(app, ["keys", "create", f"cli {scope}", "--scope", scope, "-q",
                                            "--url", run.api_url, "--api-key", ADMIN])
            assert made.exit_code == 0, made.output
            keys[scope] = made.stdout.strip()
        yield run, keys["read"], keys["write"]


def cli(service, *args: str, key: str = "write", env: dict[str, str] | None = None,
        input: str | None = None):
    """``fleetwatch ARGS`` against the service with its ``key`` ("read", "write" or "none"),
    ``input`` on its standard input."""
    run, read, write = service
    extra = {"read": ["--api-key", read], "write": ["--api-key", write], "none": []}[key]
    return CliRunner().invoke(app, [*args, "--url", run.api_url, *extra], env=env, input=input)


def ok(result) -> str:
    assert result.exit_code == 0, result.output
    return result.stdout


def refused(result, code: int, *words: str) -> None:
    """Exit ``code``, and each of ``words`` in the message on stderr (usage errors come in a
    box that wraps lines: box and wrapping are taken out)."""
    assert result.exit_code == code, result.output
    text = " ".join(re.sub(r"[│╭╮╰╯─]", " ", result.stderr).split())
    for word in words:
        assert word in text, result.stderr


def frame(rng: np.random.Generator, n: int, scale: float = 1.0) -> pd.DataFrame:
    return pd.DataFrame({"amount": rng.lognormal(3.0, 0.5, n) * scale,
                         "country": rng.choice(["DE", "FR", "IT"], n, p=[0.5, 0.3, 0.2]),
                         "score": rng.beta(2, 8, n)})


@pytest.fixture(scope="module")
def alerted(service, tmp_path_factory):
    """MODEL registered, its reference uploaded with the CLI, one window of amounts in cents
    instead of euros logged and flushed: the id of the alert that fired on it."""
    run, _read, write = service
    register_model(run.api_url, MODEL, window_seconds=WINDOW, owner="shop-ml", api_key=write,
                   features={"amount": {"type": "numeric", "source": "payments"},
                             "country": {"type": "categorical", "source": "geoip"}})
    csv = tmp_path_factory.mktemp("ref") / "train.csv"
    frame(np.random.default_rng(1), 5_000).to_csv(csv, index=False)
    out = ok(cli(service, "reference", "upload", MODEL, "--csv", str(csv), "--score-column", "score"))
    assert out.strip() == "reference of shop: 5000 rows, features amount, country; score column score"
    start = int(time.time()) // WINDOW * WINDOW - 10 * WINDOW
    live = frame(np.random.default_rng(2), 2_000, scale=100.0)
    with Client.from_env(run.endpoints) as fw:
        for i, row in enumerate(live.itertuples()):
            fw.log_prediction(MODEL, {"amount": row.amount, "country": row.country}, model_version="1",
                              prediction_id=f"p{i}", event_time=start + i * 0.1, score=row.score)
        assert fw.flush(30)
    ok(cli(service, "flush", MODEL))

    def firing() -> list[str]:
        return [a["id"] for a in json.loads(ok(cli(service, "alerts", "list", "--model", MODEL, "--json",
                                                   key="read"))) if a["feature"] == "amount"]
    return until(firing, 120, "an alert on the shifted feature")[0]


def test_models_list_show_patch(service, alerted):
    listed = json.loads(ok(cli(service, "models", "list", "--json", key="read")))
    shop = next(m for m in listed if m["model_id"] == MODEL)
    assert shop["has_reference"] is True and shop["config"]["owner"] == "shop-ml"
    table = ok(cli(service, "models", "list", key="read"))
    assert table.split("\n")[0].split()[:3] == ["MODEL", "TIER", "OWNER"]
    assert "shop" in table and "shop-ml" in table
    shown = ok(cli(service, "models", "show", MODEL, key="read"))
    assert "geoip: country; payments: amount" in shown  # the lineage
    patched = json.loads(ok(cli(service, "models", "patch", MODEL, "--set", "owner=risk-ml",
                                "--set", "routing.team=risk", "--json")))
    assert patched["config"]["owner"] == "risk-ml" and patched["config"]["routing"] == {"team": "risk"}
    assert patched["config"]["window_seconds"] == WINDOW  # kept: a merge patch
    assert patched["config"]["features"]["amount"]["source"] == "payments"
    again = json.loads(ok(cli(service, "models", "patch", MODEL, "-p", '{"routing": {"channel": "#risk"}}',
                              "--json")))
    assert again["config"]["routing"] == {"team": "risk", "channel": "#risk"}
    refused(cli(service, "models", "show", "nosuch", key="read"), 1, "model_not_found", "'nosuch'")
    refused(cli(service, "models", "patch", "nosuch", "--set", "tier=1"), 1, "model_not_found")
    refused(cli(service, "models", "patch", MODEL, "--set", "tier=7"), 1, "HTTP 422", "field tier")
    refused(cli(service, "models", "patch", MODEL, "--set", "tier"), 2, "FIELD=VALUE")
    refused(cli(service, "models", "patch", MODEL, "-p", "[1]"), 2, "JSON object")
    refused(cli(service, "models", "patch", MODEL, "--set", "owner=x", key="read"), 1,
            "HTTP 403 forbidden", "scope 'write'")


def test_reference_upload_checks_columns_and_model_and_reads_parquet(service, alerted, tmp_path):
    run = service[0]
    data = frame(np.random.default_rng(3), 300)
    csv, parquet = tmp_path / "ref.csv", tmp_path / "ref.parquet"
    data.to_csv(csv, index=False)
    data.to_parquet(parquet)
    csv_ref = tmp_path / "train.csv"
    frame(np.random.default_rng(1), 5_000).to_csv(csv_ref, index=False)  # as the fixture uploaded it
    before = json.loads(ok(cli(service, "reference", "show", MODEL, "--json", key="read")))
    assert before["count"] == 5_000 and set(before["edges"]) >= {"amount"}
    # an unknown column is an error, before anything is sent: the reference is unchanged
    refused(cli(service, "reference", "upload", MODEL, "--csv", str(csv), "--score-column", "nosuch"), 2,
            "'nosuch' is not a column of the file (columns: amount, country, score)", "--score-column")
    refused(cli(service, "reference", "upload", MODEL, "--csv", str(csv), "--label-column", "label"), 2,
            "--label-column")
    refused(cli(service, "reference", "upload", MODEL), 2, "exactly one of --csv and --parquet")
    # a model never registered is refused, and not created
    refused(cli(service, "reference", "upload", "ghost", "--csv", str(csv)), 1, "model_not_found", "'ghost'")
    refused(cli(service, "models", "show", "ghost", key="read"), 1, "model_not_found")
    refused(cli(service, "reference", "upload", MODEL, "--csv", str(csv), key="read"), 1, "scope 'write'")
    refused(cli(service, "reference", "upload", MODEL, "--csv", str(csv), key="none"), 1,
            "HTTP 401", "--api-key")
    assert json.loads(ok(cli(service, "reference", "show", MODEL, "--json", key="read")))["count"] == 5_000
    # a column that is no declared feature and no named column: uploaded as a feature, with a note
    result = cli(service, "reference", "upload", MODEL, "--csv", str(csv), "--merge")
    assert result.exit_code == 0
    assert "note: column(s) score are not features declared for shop" in result.stderr
    assert "features amount, country, score" in result.stdout
    ok(cli(service, "reference", "upload", MODEL, "--csv", str(csv_ref), "--score-column", "score"))
    # Parquet, merged into the reference
    out = json.loads(ok(cli(service, "reference", "upload", MODEL, "--parquet", str(parquet),
                            "--score-column", "score", "--merge", "--json")))
    assert out == {"model_id": MODEL, "count": 5_300, "features": ["amount", "country"],
                   "learned_floors": None, "daily_shape": None}
    shown = ok(cli(service, "reference", "show", MODEL, key="read"))
    assert "5300" in shown and "amount" in shown and "numeric" in shown
    assert httpx.get(f"{run.api_url}/v1/models/{MODEL}/reference", headers={"X-API-Key": service[1]},
                     timeout=10).json()["count"] == 5_300
    # with a time column, floors are learned from how each feature moves between windows
    t0 = int(time.time()) // WINDOW * WINDOW - 20 * WINDOW
    timed = frame(np.random.default_rng(5), 3_000).assign(t=lambda f: t0 + f.index)
    timed.to_csv(csv, index=False)
    refused(cli(service, "reference", "upload", MODEL, "--csv", str(csv), "--time-column", "time"), 2,
            "--time-column", "'time' is not a column")
    out = ok(cli(service, "reference", "upload", MODEL, "--csv", str(csv), "--score-column", "score",
                 "--time-column", "t", "--merge"))
    assert "time column t" in out and "floors: learned from 10 windows of 300 s" in out, out
    assert "daily shape: none (the reference's event times do not cover a whole day)" in out, out
    assert "learned from 10 windows" in ok(cli(service, "models", "show", MODEL, key="read"))


def test_alerts_and_incidents_list_show_ack_resolve(service, alerted):
    table = ok(cli(service, "alerts", "list", "--model", MODEL, key="read"))
    assert alerted in table and "firing" in table and "amount" in table
    assert alerted in ok(cli(service, "alerts", "list", "-q", "--state", "firing", key="read")).split()
    assert alerted in ok(cli(service, "alerts", "list", "-q", "--since", "1h", key="read")).split()
    assert ok(cli(service, "alerts", "list", "-q", "--since", "2099-01-01T00:00:00Z", key="read")) == ""
    shown = ok(cli(service, "alerts", "show", alerted, key="read"))
    assert alerted in shown and "effect size" in shown
    alert = json.loads(ok(cli(service, "alerts", "show", alerted, "--json", key="read")))
    incident = alert["incident_id"]
    assert incident in ok(cli(service, "incidents", "list", "-q", key="read")).split()
    assert "shop" in ok(cli(service, "incidents", "list", "--model", MODEL, key="read"))
    shown = ok(cli(service, "incidents", "show", incident, key="read"))
    assert alerted in shown and "payments" in shown
    # a read-only key cannot act: a clear message, exit 1, the alert unchanged
    refused(cli(service, "alerts", "ack", alerted, key="read"), 1, "HTTP 403 forbidden", "scope 'write'")
    assert json.loads(ok(cli(service, "alerts", "show", alerted, "--json", key="read")))["state"] == "firing"
    out = ok(cli(service, "alerts", "ack", alerted, "--by", "ana", "-c", "looking"))
    assert out.strip() == f"{alerted}: acknowledged (by ana)"
    acked = json.loads(ok(cli(service, "alerts", "show", alerted, "--json", key="read")))
    assert (acked["state"], acked["acked_by"], acked["ack_comment"]) == ("acknowledged", "ana", "looking")
    assert json.loads(ok(cli(service, "alerts", "resolve", alerted, "--by", "ana", "--json")))[0][
        "state"] == "resolved"
    refused(cli(service, "alerts", "resolve", alerted), 1, "alert_resolved")
    refused(cli(service, "alerts", "ack", "nosuch"), 1, "HTTP 404 alert_not_found")
    refused(cli(service, "incidents", "show", "nosuch", key="read"), 1, "incident_not_found")
    refused(cli(service, "alerts", "list", "--model", "nosuch", key="read"), 1, "model_not_found")
    refused(cli(service, "alerts", "list", "--state", "sleeping", key="read"), 1, "HTTP 422", "state")


def test_silence_add_list_expire_with_alertmanager_matchers(service, alerted):
    sid = ok(cli(service, "silence", "add", f"model={MODEL}", 'check=~"psi|ks"', "owner!=nobody",
                 "-d", "2h", "-c", "retraining", "--by", "ana", "-q")).strip()
    listed = json.loads(ok(cli(service, "silence", "list", "--json", key="read")))
    mine = next(s for s in listed if s["id"] == sid)
    assert mine["state"] == "active" and mine["created_by"] == "ana"
    assert [(m["name"], m["value"], m["regex"], m["equal"]) for m in mine["matchers"]] == [
        ("model", MODEL, False, True), ("check", "psi|ks", True, True), ("owner", "nobody", False, False)]
    length = datetime.fromisoformat(mine["ends_at"]) - datetime.fromisoformat(mine["starts_at"])
    # 2 h from when the command ran (the API starts a silence on its arrival)
    assert 7_140 < length.total_seconds() <= 7_200
    table = ok(cli(service, "silence", "list", key="read"))
    assert sid in table and 'model="shop" check=~"psi|ks" owner!="nobody"' in table
    muted = ok(cli(service, "silence", "add", f"model={MODEL}", "feature=amount", "-c", "all of it", "-q"))
    row = next(line for line in ok(cli(service, "alerts", "list", key="read")).split("\n") if alerted in line)
    assert muted.strip() in row  # silenced now, though the alert was written before the silence
    assert muted.strip() in ok(cli(service, "alerts", "show", alerted, key="read"))
    shown = json.loads(ok(cli(service, "alerts", "show", alerted, "--json", key="read")))
    assert muted.strip() in shown["silenced_by"] and not shown["notify"]  # the API says so
    refused(cli(service, "silence", "add", "model~shop", "-c", "x"), 2, "is not a matcher")
    refused(cli(service, "silence", "add", "team=shop", "-c", "x"), 2, "unknown label 'team'")
    refused(cli(service, "silence", "add", f"model={MODEL}", "-d", "soon", "-c", "x"), 2, "--duration")
    refused(cli(service, "silence", "add", 'check=~"(("', "-c", "x"), 1, "HTTP 422", "regular expression")
    refused(cli(service, "silence", "add", 'model=~".*"', "-c", "x"), 1, "HTTP 422", "empty string")
    refused(cli(service, "silence", "add", f"model={MODEL}", "-c", "x", key="read"), 1, "scope 'write'")
    refused(cli(service, "silence", "expire", sid, key="read"), 1, "scope 'write'")
    assert ok(cli(service, "silence", "expire", sid)).strip() == f"{sid}: expired"
    assert sid in ok(cli(service, "silence", "list", "--state", "expired", "-q", key="read")).split()
    refused(cli(service, "silence", "expire", "nosuch"), 1, "silence_not_found")


def test_status_of_a_model_and_of_the_fleet(service, alerted):
    run, read, _ = service
    status = json.loads(ok(cli(service, "status", MODEL, "--json", key="read")))
    direct = httpx.get(f"{run.api_url}/v1/models/{MODEL}/status", headers={"X-API-Key": read},
                       timeout=10).json()
    assert status == direct
    assert status["records"]["in_evaluated_windows"] == 2_000 and status["windows"]["evaluated"] == 1
    shown = ok(cli(service, "status", MODEL, key="read"))
    assert "2000 in evaluated windows" in shown and "1 evaluated" in shown and "against reference" in shown
    fleet = ok(cli(service, "status", key="read"))
    header, row = fleet.split("\n")[0].split(), next(line for line in fleet.split("\n") if "shop" in line)
    assert header[:2] == ["MODEL", "RECORDS"] and row.split()[:2] == [MODEL, "2000"]
    refused(cli(service, "status", "nosuch", key="read"), 1, "model_not_found")
    refused(cli(service, "flush", "nosuch"), 1, "model_not_found")
    refused(cli(service, "flush", MODEL, key="read"), 1, "scope 'write'")
    assert "flush of shop requested" in ok(cli(service, "flush", MODEL))


def test_where_the_api_is_flags_environment_endpoints_file(service, alerted, tmp_path):
    run, read, _ = service
    runner = CliRunner()
    # the endpoints file of `fleetwatch run` (FLEETWATCH_DATA_DIR), the key from the environment
    env = {"FLEETWATCH_DATA_DIR": str(run.data_dir), "FLEETWATCH_API_KEY": read, "FLEETWATCH_API_URL": None}
    listed = runner.invoke(app, ["models", "list", "--json"], env=env)
    assert MODEL in [m["model_id"] for m in json.loads(listed.stdout)]
    env = {"FLEETWATCH_API_URL": run.api_url, "FLEETWATCH_API_KEY": read}
    assert runner.invoke(app, ["status", MODEL], env=env).exit_code == 0
    unreachable = runner.invoke(app, ["models", "list", "--url", "http://127.0.0.1:9"],
                                env={"FLEETWATCH_API_URL": None})
    assert unreachable.exit_code == 3 and "cannot be reached" in unreachable.stderr


def test_url_and_key_before_the_subcommand(service, alerted):
    run, read, write = service
    runner = CliRunner()
    nowhere = {"FLEETWATCH_API_URL": "http://127.0.0.1:9", "FLEETWATCH_API_KEY": None}
    before = runner.invoke(app, ["--url", run.api_url, "--api-key", read, "status", MODEL, "--json"],
                           env=nowhere)  # before the subcommand, and over the environment
    assert before.exit_code == 0, before.output
    assert json.loads(before.stdout)["model_id"] == MODEL
    # after the subcommand wins over before it
    after = runner.invoke(app, ["--url", "http://127.0.0.1:9", "--api-key", "wrong", "models", "list",
                                "--url", run.api_url, "--api-key", read], env=nowhere)
    assert after.exit_code == 0, after.output
    refused(runner.invoke(app, ["--url", run.api_url, "--api-key", read, "flush", MODEL], env=nowhere),
            1, "scope 'write'")  # the key given before the subcommand is the one sent


def test_models_delete_asks_says_what_it_deletes_and_refuses_unknown_models(service):
    run, read, write = service
    register_model(run.api_url, "doomed", window_seconds=WINDOW, api_key=write,
                   features={"x": {"type": "numeric"}})
    kept = cli(service, "models", "delete", "doomed", input="n\n")
    refused(kept, 1, "nothing deleted")
    assert "reference profile" in kept.stderr and "alerts and incidents" in kept.stderr  # deleted, kept
    assert ok(cli(service, "models", "show", "doomed", key="read"))
    refused(cli(service, "models", "delete", "doomed", "--yes", key="read"), 1, "scope 'write'")
    asked = cli(service, "models", "delete", "doomed", input="y\n")
    assert "deleted model" in ok(asked) and "configuration" in asked.stdout
    refused(cli(service, "models", "show", "doomed", key="read"), 1, "model_not_found")
    register_model(run.api_url, "doomed", window_seconds=WINDOW, api_key=write,
                   features={"x": {"type": "numeric"}})
    gone = json.loads(ok(cli(service, "models", "delete", "doomed", "--yes", "--json")))
    assert gone["model_id"] == "doomed" and gone["deleted_keys"] >= 1 and gone["kept"]
    refused(cli(service, "models", "delete", "nosuch", "--yes"), 1, "model_not_found")


def test_api_url_falls_back_to_the_endpoints_file_then_the_default(tmp_path, monkeypatch):
    from service.cli.connection import DEFAULT_URL, api_url
    from service.endpoints import Endpoints, write_endpoints

    monkeypatch.setenv("FLEETWATCH_DATA_DIR", str(tmp_path))
    assert api_url(None) == DEFAULT_URL == "http://127.0.0.1:8000"
    write_endpoints(tmp_path, Endpoints("http://127.0.0.1:8123/", "127.0.0.1:1", "redis://127.0.0.1:2/0"))
    assert api_url(None) == "http://127.0.0.1:8123"
    assert api_url("http://elsewhere:80/") == "http://elsewhere:80"


def test_performance_of_a_tier1_model_with_a_labelled_reference(service, alerted, tmp_path):
    """The new user's path to performance: a tier-1 model with `performance`, its labelled
    reference uploaded from a file (`--truth-column`), predictions and their labels, then
    `fleetwatch performance` shows each cohort judged against that reference."""
    run, _read, write = service
    register_model(run.api_url, "churn", tier=1, window_seconds=WINDOW, api_key=write,
                   performance={"threshold": 0.5})
    rng = np.random.default_rng(4)

    def rows(n: int, broken: bool = False) -> pd.DataFrame:
        x = rng.normal(0, 1, n)
        p = 1 / (1 + np.exp(-2 * x))
        return pd.DataFrame({"x": x, "score": rng.random(n) if broken else p, "churned": rng.random(n) < p})

    ref = tmp_path / "validation.parquet"
    rows(4_000).to_parquet(ref)
    refused(cli(service, "performance", MODEL, key="read"), 1, "HTTP 409 labels_not_joined")
    refused(cli(service, "reference", "upload", MODEL, "--parquet", str(ref), "--score-column", "score",
                "--truth-column", "churned"), 1, "HTTP 422", "field truth_column")  # not tier 1
    out = ok(cli(service, "reference", "upload", "churn", "--parquet", str(ref), "--score-column", "score",
                 "--truth-column", "churned"))
    assert out.strip() == ("reference of churn: 4000 rows, features x; score column score; truth column "
                           "churned; labelled: the baseline of the label-joined checks")
    start = int(time.time()) // WINDOW * WINDOW - 4 * WINDOW
    live = pd.concat([rows(600), rows(600, broken=True)], ignore_index=True)
    with Client.from_env(run.endpoints) as fw:
        for i, r in enumerate(live.itertuples()):
            t = start + (i // 600) * WINDOW + (i % 600) * 0.4
            fw.log_prediction("churn", {"x": r.x}, model_version="1", prediction_id=f"c{i}", event_time=t,
                              score=float(r.score))
            fw.log_label("churn", f"c{i}", bool(r.churned), t + 30)
        assert fw.flush(30)
    ok(cli(service, "flush", "churn"))

    def judged() -> dict | None:
        perf = json.loads(ok(cli(service, "performance", "churn", "--json", key="read")))
        done = [c for c in perf["cohorts"] if c["evaluation"] is not None]
        return perf if len(done) == 2 else None

    perf = until(judged, 120, "both cohorts judged")
    first, second = perf["cohorts"]
    assert (first["labeled"], second["labeled"]) == (600, 600)
    assert first["evaluation"]["baseline"] == second["evaluation"]["baseline"] == "reference"
    status = {r["check"]: r["status"] for r in second["evaluation"]["results"]}
    assert status["auc_drop"] == "drift"  # random scores: AUC 0.5 against the reference's ~0.8
    table = ok(cli(service, "performance", "churn", key="read"))
    header = next(line for line in table.split("\n") if line.startswith("WINDOW"))
    assert header.split()[:6] == ["WINDOW", "PREDICTIONS", "LABELED", "MATURE", "ROC", "AUC"]
    assert "auc_drop=drift" in table and "reference" in table
    assert "joined=1200" in ok(cli(service, "status", "churn", key="read"))


def test_keys_create_list_revoke(service):
    run = service[0]
    admin = {"env": {"FLEETWATCH_API_KEY": ADMIN}, "key": "none"}
    made = json.loads(ok(cli(service, "keys", "create", "ci reader", "--json", **admin)))
    assert made["scope"] == "read" and made["token"].startswith("fwk_")
    table = ok(cli(service, "keys", "list", **admin))
    assert made["id"] in table and "ci reader" in table and "cli write" in table
    assert "fwk_" not in table  # tokens are never listed
    assert httpx.get(f"{run.api_url}/v1/models", headers={"X-API-Key": made["token"]}).status_code == 200
    refused(cli(service, "keys", "list"), 1, "HTTP 403 forbidden", "scope 'admin'")  # a write key
    assert ok(cli(service, "keys", "revoke", made["id"], **admin)).strip() == \
        f"key {made['id']} ('ci reader') revoked"
    assert httpx.get(f"{run.api_url}/v1/models", headers={"X-API-Key": made["token"]}).status_code == 401
    refused(cli(service, "keys", "create", "x", "--scope", "root", **admin), 1, "HTTP 422", "scope")
