"""Silences: matcher and state semantics (pure), the Redis store, and the API on a real Redis."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta, timezone

import httpx
import pytest
import pytest_asyncio
from pydantic import ValidationError

from detectors.policy.silence import (
    Matcher,
    Silence,
    SilenceSpec,
    expire,
    new_silence,
    silencing,
)
from service.alerting.keys import SILENCES
from service.alerting.silences import SilenceStore
from service.api.app import create_app
from service.profiles.store import Store
from service.settings import Settings

T0 = datetime(2024, 5, 1, 12, tzinfo=UTC)
US = timedelta(microseconds=1)


def silence(sid: str = "s", start: datetime = T0, end: datetime = T0 + timedelta(hours=1),
            matchers: list[dict] | None = None) -> Silence:
    return Silence(id=sid, created_at=start, starts_at=start, ends_at=end, created_by="ana",
                   comment="test", matchers=matchers or [{"name": "model", "value": "fraud"}])


def spec(**over) -> dict:
    body = {"matchers": [{"name": "model", "value": "fraud"}],
            "ends_at": (datetime.now(UTC) + timedelta(hours=1)).isoformat(),
            "created_by": "ana", "comment": "retraining fraud"}
    return {**body, **over}


def loc(exc: pytest.ExceptionInfo[ValidationError]) -> tuple:
    return exc.value.errors()[0]["loc"]


# -- matching -----------------------------------------------------------------------------


def test_equality_matcher_compares_the_whole_value_case_sensitively():
    m = Matcher(name="model", value="fraud")
    assert m.matches_value("fraud") is True
    assert m.matches_value("fraud-v3") is False
    assert m.matches_value("Fraud") is False
    assert m.matches_value("") is False


def test_regex_matcher_is_anchored_at_both_ends():
    m = Matcher(name="check", value="psi|ks", regex=True)
    hits = [m.matches_value(v) for v in ("psi", "ks", "kss", "xpsi", "ps")]
    assert hits == [True, True, False, False, False]
    prefix = Matcher(name="model", value="fraud-.*", regex=True)
    assert prefix.matches_value("fraud-v3") is True
    assert prefix.matches_value("old-fraud-v3") is False


def test_negated_matchers_invert_equality_and_regex():
    ne = Matcher(name="severity", value="critical", equal=False)
    assert (ne.matches_value("warning"), ne.matches_value("critical")) == (True, False)
    nre = Matcher(name="check", value="psi|ks", regex=True, equal=False)
    assert (nre.matches_value("js"), nre.matches_value("ks")) == (True, False)


def test_missing_or_none_label_equals_the_empty_string():
    owner_is = silence(matchers=[{"name": "model", "value": "fraud"}, {"name": "owner", "value": "payments"}])
    owner_not = silence(matchers=[{"name": "model", "value": "fraud"},
                                  {"name": "owner", "value": "payments", "equal": False}])
    for labels in ({"model": "fraud"}, {"model": "fraud", "owner": None}):
        assert owner_is.matches(labels) is False
        assert owner_not.matches(labels) is True
    window_level = silence(matchers=[{"name": "model", "value": "fraud"},
                                     {"name": "feature", "value": ".+", "regex": True, "equal": False}])
    assert window_level.matches({"model": "fraud", "feature": ""}) is True
    assert window_level.matches({"model": "fraud", "feature": None}) is True
    assert window_level.matches({"model": "fraud", "feature": "amount"}) is False


def test_every_matcher_must_match():
    s = silence(matchers=[{"name": "model", "value": "fraud"}, {"name": "check", "value": "psi"},
                          {"name": "severity", "value": "warning|info", "regex": True}])
    full = {"model": "fraud", "feature": "amount", "check": "psi", "severity": "warning", "owner": "pay"}
    assert s.matches(full) is True
    for key, other in (("model", "churn"), ("check", "ks"), ("severity", "critical")):
        assert s.matches({**full, key: other}) is False, key


# -- state --------------------------------------------------------------------------------


def test_state_is_pending_before_start_active_on_start_up_to_end_exclusive():
    s = silence(start=T0, end=T0 + timedelta(hours=1))
    assert s.state(T0 - US) == "pending"
    assert s.state(T0) == "active"
    assert s.state(T0 + timedelta(hours=1) - US) == "active"
    assert s.state(T0 + timedelta(hours=1)) == "expired"
    # Unix seconds and naive (UTC) datetimes name the same instants
    assert s.state(T0.timestamp() - 1) == "pending"
    assert s.state(T0.timestamp() + 3600) == "expired"
    assert s.state(datetime(2024, 5, 1, 12, 30)) == "active"
    cest = timezone(timedelta(hours=2))
    assert s.state(datetime(2024, 5, 1, 13, 59, tzinfo=cest)) == "pending"  # 11:59 UTC
    assert s.state(datetime(2024, 5, 1, 14, 30, tzinfo=cest)) == "active"  # 12:30 UTC


def test_silencing_returns_only_active_matching_silences_in_order():
    ss = [silence("a"), silence("pending", start=T0 + timedelta(minutes=30)),
          silence("other", matchers=[{"name": "model", "value": "churn"}]),
          silence("b", matchers=[{"name": "check", "value": "psi"}]),
          silence("expired", start=T0 - timedelta(hours=2), end=T0)]
    labels = {"model": "fraud", "check": "psi"}
    assert silencing(ss, labels, T0 + timedelta(minutes=10)) == ["a", "b"]
    assert silencing(ss, labels, T0 + timedelta(minutes=30)) == ["a", "pending", "b"]
    assert silencing(ss, {"model": "fraud", "check": "ks"}, T0) == ["a"]
    assert silencing(ss, labels, T0 + timedelta(hours=1)) == []


# -- creation and expiry (pure) --------------------------------------------------------------


def test_new_silence_starts_now_when_start_is_missing_or_past_and_keeps_a_future_start():
    end = T0 + timedelta(hours=2)
    base = {"matchers": [{"name": "model", "value": "fraud"}], "ends_at": end,
            "created_by": "ana", "comment": "c"}
    assert new_silence(SilenceSpec(**base), "x", T0).starts_at == T0
    past = SilenceSpec(**base, starts_at=T0 - timedelta(days=1))
    assert new_silence(past, "x", T0).starts_at == T0
    future = SilenceSpec(**base, starts_at=T0 + timedelta(hours=1))
    s = new_silence(future, "x", T0)
    assert (s.id, s.created_at, s.starts_at, s.ends_at) == ("x", T0, T0 + timedelta(hours=1), end)
    assert s.state(T0) == "pending"
    with pytest.raises(ValueError, match="ends_at"):
        new_silence(SilenceSpec(**base), "x", end)  # would end the moment it starts


def test_expire_ends_active_now_closes_pending_and_leaves_expired_alone():
    s = silence(start=T0, end=T0 + timedelta(hours=1))
    now = T0 + timedelta(minutes=10)
    ended = expire(s, now)
    assert (ended.starts_at, ended.ends_at, ended.state(now)) == (T0, now, "expired")
    pending = expire(s, T0 - timedelta(hours=1))
    assert (pending.starts_at, pending.ends_at) == (T0 - timedelta(hours=1),) * 2
    assert pending.state(T0 - timedelta(hours=1)) == "expired"
    later = T0 + timedelta(hours=5)
    assert expire(ended, later) == ended


# -- validation ---------------------------------------------------------------------------


def test_spec_validation_names_the_field():
    ok = {"matchers": [{"name": "model", "value": "fraud"}], "ends_at": T0 + timedelta(hours=1),
          "created_by": "ana", "comment": "c"}
    with pytest.raises(ValidationError) as exc:
        SilenceSpec(**{**ok, "starts_at": T0 + timedelta(hours=1)})
    assert loc(exc) == ("ends_at",)
    with pytest.raises(ValidationError) as exc:
        SilenceSpec(**{**ok, "matchers": [{"name": "model", "value": "a"},
                                          {"name": "region", "value": "eu"}]})
    assert loc(exc) == ("matchers", 1, "name")
    with pytest.raises(ValidationError) as exc:
        SilenceSpec(**{**ok, "matchers": [{"name": "model", "value": "fraud(", "regex": True}]})
    assert loc(exc) == ("matchers", 0, "value")
    assert "regular expression" in exc.value.errors()[0]["msg"]
    # not a regex: the same text is a plain value
    plain = SilenceSpec(**{**ok, "matchers": [{"name": "model", "value": "fraud("}]})
    assert plain.matchers[0].matches_value("fraud(") is True
    with pytest.raises(ValidationError) as exc:
        SilenceSpec(**{**ok, "matchers": []})
    assert loc(exc) == ("matchers",)
    with pytest.raises(ValidationError) as exc:
        SilenceSpec(**{**ok, "matchers": [{"name": "model", "value": f"m{i}"} for i in range(17)]})
    assert loc(exc) == ("matchers",)
    with pytest.raises(ValidationError) as exc:  # would mute every alert
        SilenceSpec(**{**ok, "matchers": [{"name": "model", "value": ".*", "regex": True}]})
    assert loc(exc) == ("matchers",)
    with pytest.raises(ValidationError) as exc:
        SilenceSpec(**{**ok, "comment": ""})
    assert loc(exc) == ("comment",)
    naive = SilenceSpec(**{**ok, "starts_at": datetime(2024, 5, 1, 12), "ends_at": datetime(2024, 5, 1, 13)})
    assert (naive.starts_at, naive.ends_at) == (T0, T0 + timedelta(hours=1))


# -- store (real Redis) -------------------------------------------------------------------


@pytest_asyncio.fixture
async def fw_store(redis_url: str, redis_is_cluster: bool):
    s = Store(redis_url, redis_is_cluster)
    await s.r.delete(SILENCES)
    yield s
    await s.r.delete(SILENCES)
    await s.close()


def spec_at(hours: float, **over) -> SilenceSpec:
    return SilenceSpec(matchers=[{"name": "model", "value": "fraud"}],
                       ends_at=T0 + timedelta(hours=hours), created_by="ana", comment="c", **over)


async def test_store_lists_newest_first_filters_by_state_and_purges_after_retention(fw_store):
    store = SilenceStore(fw_store.r)
    first = await store.create(spec_at(1), T0)
    second = await store.create(spec_at(3, starts_at=T0 + timedelta(hours=2)), T0 + timedelta(minutes=1))
    assert len(first.id) == 32 and first.id != second.id
    assert [s.id for s in await store.list(None, T0 + timedelta(minutes=5))] == [second.id, first.id]
    assert [s.id for s in await store.active(T0 + timedelta(minutes=5))] == [first.id]
    assert [s.id for s in await store.list("pending", T0 + timedelta(minutes=5))] == [second.id]
    assert await store.get(first.id) == first
    assert await store.get("nope") is None
    assert await store.expire("nope", T0) is None

    ended = await store.expire(first.id, T0 + timedelta(minutes=30))
    assert ended.ends_at == T0 + timedelta(minutes=30)
    assert (await store.get(first.id)).ends_at == T0 + timedelta(minutes=30)
    assert [s.id for s in await store.list("expired", T0 + timedelta(minutes=31))] == [first.id]

    # 7 days after `first` ended it is still kept; just after, creating a silence purges it
    await store.create(spec_at(24 * 7 + 2), T0 + timedelta(days=7, minutes=30))
    assert await store.get(first.id) is not None
    third = await store.create(spec_at(24 * 7 + 2), T0 + timedelta(days=7, minutes=31))
    assert await store.get(first.id) is None
    assert await store.get(second.id) is not None  # ended at T0 + 3h: 7 days not yet past
    assert await store.get(third.id) == third


# -- API (real Redis) ---------------------------------------------------------------------


@pytest_asyncio.fixture
async def http(redis_url: str, fw_store: Store):
    app = create_app(Settings(redis_url=redis_url), fw_store)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
        yield client


async def test_create_list_and_silence_a_matching_alert(http, fw_store):
    before = time.time()
    resp = await http.post("/v1/silences", json=spec(matchers=[
        {"name": "model", "value": "fraud"}, {"name": "check", "value": "psi|ks", "regex": True}]))
    assert resp.status_code == 201, resp.text
    created = resp.json()
    assert created["state"] == "active" and created["created_by"] == "ana"
    assert before <= datetime.fromisoformat(created["starts_at"]).timestamp() <= time.time()
    assert created["matchers"][1] == {"name": "check", "value": "psi|ks", "regex": True, "equal": True,
                                      "usable": True}

    pending = (await http.post("/v1/silences", json=spec(
        starts_at=(datetime.now(UTC) + timedelta(minutes=30)).isoformat()))).json()
    assert pending["state"] == "pending"

    active = (await http.get("/v1/silences", params={"state": "active"})).json()
    assert [s["id"] for s in active] == [created["id"]]
    assert [s["id"] for s in (await http.get("/v1/silences")).json()] == [pending["id"], created["id"]]
    assert (await http.get(f"/v1/silences/{created['id']}")).json() == created

    now = datetime.now(UTC)
    stored = await SilenceStore(fw_store.r).active(now)
    assert silencing(stored, {"model": "fraud", "feature": "amount", "check": "ks"}, now) == [created["id"]]
    assert silencing(stored, {"model": "fraud", "feature": "amount", "check": "js"}, now) == []
    assert silencing(stored, {"model": "churn", "check": "ks"}, now) == []


@pytest.mark.parametrize(("body", "field"), [
    (spec(starts_at="2030-01-02T00:00:00Z", ends_at="2030-01-01T00:00:00Z"), "ends_at"),
    (spec(ends_at="2020-01-01T00:00:00Z"), "ends_at"),  # ends before it would start (now)
    (spec(matchers=[{"name": "region", "value": "eu"}]), "matchers.0.name"),
    (spec(matchers=[{"name": "model", "value": "a"}, {"name": "check", "value": "[psi", "regex": True}]),
     "matchers.1.value"),
    (spec(matchers=[]), "matchers"),
    (spec(created_by=""), "created_by"),
])
async def test_invalid_silences_are_422_naming_the_field(http, body, field):
    resp = await http.post("/v1/silences", json=body)
    assert resp.status_code == 422
    assert resp.json()["field"] == field
    assert resp.json()["code"] == "invalid_request"
    assert (await http.get("/v1/silences")).json() == []


async def test_unknown_state_filter_is_422(http):
    resp = await http.get("/v1/silences", params={"state": "firing"})
    assert resp.status_code == 422 and resp.json()["field"] == "state"


async def test_unknown_silence_is_404_naming_silence_id(http):
    for method in ("GET", "DELETE"):
        resp = await http.request(method, "/v1/silences/nope")
        assert resp.status_code == 404, method
        assert resp.json() == {"code": "silence_not_found", "message": "unknown silence 'nope'",
                               "field": "silence_id"}


async def test_delete_expires_the_silence_which_then_lists_as_expired(http):
    created = (await http.post("/v1/silences", json=spec())).json()
    before = time.time()
    resp = await http.delete(f"/v1/silences/{created['id']}")
    assert resp.status_code == 200
    ended = resp.json()
    assert ended["state"] == "expired" and ended["id"] == created["id"]
    assert before <= datetime.fromisoformat(ended["ends_at"]).timestamp() <= time.time()
    assert ended["starts_at"] == created["starts_at"]
    assert (await http.get("/v1/silences", params={"state": "active"})).json() == []
    expired = (await http.get("/v1/silences", params={"state": "expired"})).json()
    assert [(s["id"], s["ends_at"]) for s in expired] == [(created["id"], ended["ends_at"])]
    again = (await http.delete(f"/v1/silences/{created['id']}")).json()
    assert again["ends_at"] == ended["ends_at"]  # expiring twice changes nothing
