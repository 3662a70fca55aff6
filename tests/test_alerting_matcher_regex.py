"""Regular expressions of silence and receiver matchers: linear-time matching (RE2),
refused patterns, the length limit and the compile cache."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import httpx
import pytest
import pytest_asyncio

from detectors.policy.silence import STORED_CONTEXT, Matcher, Silence, compile_regex, silencing
from service.alerting.keys import SILENCES
from service.alerting.models import Alert
from service.alerting.silences import SilenceStore
from service.api.app import create_app
from service.paging.keys import RECEIVERS
from service.paging.receiver_config import Receiver
from service.paging.receiver_store import ReceiverStore
from service.profiles.store import Store
from service.settings import Settings

# Patterns on which a backtracking engine takes time exponential (or of a high polynomial
# degree) in the length of a subject they fail to match.
PATHOLOGICAL = ["(a+)+$", "(a|a)*b", "(a|aa)+", "(a*)*b", "(.*a){20}", "((a+)+)+c", "(\\w+\\s?)+$"]
VALUE = "a" * 255 + "!"  # 256 characters, matched by none of them

# Run in a child process, so that a backtracking engine's hang is ended by a timeout
# (the C matcher of `re` is not interruptible) and reported as a failure.
_TIMING = """
import json, sys, time
from detectors.policy.silence import Matcher, Silence
from service.paging.receiver_config import ReceiverMatcher
patterns, value = json.loads(sys.argv[1]), sys.argv[2]
out = {}
for p in patterns:
    silence = Silence(id="s", created_at=0, starts_at=0, ends_at=60, created_by="ana", comment="c",
                      matchers=[{"name": "model", "value": p, "regex": True}])
    receiver = ReceiverMatcher(name="team", value=p, regex=True)
    t = time.perf_counter()
    hits = (silence.matches({"model": value, "feature": value}), receiver.matches_value(value))
    out[p] = [time.perf_counter() - t, hits]
print(json.dumps(out))
"""


@pytest.mark.integration
def test_pathological_patterns_match_a_256_character_value_in_milliseconds():
    try:
        run = subprocess.run([sys.executable, "-c", _TIMING, json.dumps(PATHOLOGICAL), VALUE],
                             capture_output=True, text=True, timeout=30, check=True)
    except subprocess.TimeoutExpired:
        pytest.fail("matching a 256-character value did not finish in 30 s (backtracking engine)")
    timings = json.loads(run.stdout)
    for pattern, (seconds, hits) in timings.items():
        assert hits == [False, False], pattern
        assert seconds < 0.05, (pattern, seconds)  # RE2: tens of microseconds


@pytest.mark.parametrize(("pattern", "subject", "hit"), [
    ("(a+)+$", "aaaa", True),        # anchored full match, as Alertmanager's
    ("(a+)+$", "aaab", False),
    ("psi|ks", "ks", True),
    ("psi|ks", "kss", False),
    ("ps", "psi", False),
    ("pay.*", "payments", True),
    (".*ment.*", "payments", True),
    ("(?i)FRAUD-v[0-9]+", "fraud-v3", True),
    ("\\d{2,3}", "1234", False),
    ("a.c", "a\nc", False),          # . does not match a newline, as in Python and Go
])
def test_full_match_semantics(pattern: str, subject: str, hit: bool):
    assert Matcher(name="model", value=pattern, regex=True).matches_value(subject) is hit
    assert Matcher(name="model", value=pattern, regex=True, equal=False).matches_value(subject) is not hit


def test_each_stored_pattern_is_compiled_once():
    pattern = "cache-(test|probe)-[0-9]+"
    before = compile_regex.cache_info()
    silence = Silence(id="s", created_at=0, starts_at=0, ends_at=60, created_by="ana", comment="c",
                      matchers=[{"name": "model", "value": pattern, "regex": True}])
    for _ in range(100):  # what reading the stored silence on every window does
        again = Silence.model_validate_json(silence.model_dump_json())
        assert again.matches({"model": "cache-probe-7"})
    after = compile_regex.cache_info()
    assert after.misses - before.misses == 1
    assert after.hits - before.hits >= 100


# -- the API refuses what RE2 cannot run, and patterns over the length limit --------------


@pytest_asyncio.fixture
async def http(redis_url: str, redis_is_cluster: bool):
    store = Store(redis_url, redis_is_cluster)
    await store.r.delete(SILENCES, RECEIVERS)
    app = create_app(Settings(redis_url=redis_url, matcher_regex_max_length=32), store)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
        yield client
    await store.r.delete(SILENCES, RECEIVERS)
    await store.close()


def silence_body(*matchers: dict) -> dict:
    return {"matchers": [{"name": "model", "value": "fraud"}, *matchers],
            "ends_at": (datetime.now(UTC) + timedelta(hours=1)).isoformat(),
            "created_by": "ana", "comment": "c"}


def receiver_body(*matchers: dict) -> dict:
    return {"name": "r", "kind": "webhook", "url": "https://93.184.216.34/hook", "secret": "s" * 16,
            "matchers": [{"name": "team", "value": "pay"}, *matchers]}


REFUSED = [
    ("pay(?=ments)", "invalid perl operator"),       # lookahead
    ("(?<!x)pay", "invalid perl operator"),          # lookbehind
    ("(pay)\\1", "invalid escape sequence"),         # backreference
    ("a{1001}", "invalid repetition size"),          # beyond RE2's repetition limit
    ("[z-a]", "invalid character class range"),
    ("pay(", "missing )"),
    ("p" * 33, "at most 32 characters"),             # FLEETWATCH_MATCHER_REGEX_MAX_LENGTH
]


@pytest.mark.parametrize(("pattern", "why"), REFUSED)
async def test_unsupported_or_long_patterns_are_422_naming_the_field(http, pattern: str, why: str):
    for path, body in (("/v1/silences", silence_body), ("/v1/receivers", receiver_body)):
        resp = await http.post(path, json=body({"name": "owner", "value": pattern, "regex": True}))
        assert resp.status_code == 422, (path, resp.text)
        assert resp.json()["field"] == "matchers.1.value", path
        assert why in resp.json()["message"], (path, resp.json())
        assert (await http.get(path)).json() == []


async def test_the_length_limit_is_on_regular_expressions_only(http):
    long_value = {"name": "owner", "value": "p" * 33}
    assert (await http.post("/v1/silences", json=silence_body(long_value))).status_code == 201
    resp = await http.post("/v1/receivers", json=receiver_body(long_value))
    assert resp.status_code == 201
    ok = {"name": "owner", "value": "(a+)+$", "regex": True}
    assert (await http.post("/v1/silences", json=silence_body(ok))).status_code == 201


async def test_stored_patterns_re2_refuses_read_back_as_matching_nothing(http, redis_url: str,
                                                                       redis_is_cluster: bool):
    """A silence and a receiver stored by a release on Python's `re` (lookahead) still read
    back, list, show and delete; they silence and receive nothing, even negated."""
    store = Store(redis_url, redis_is_cluster)
    try:
        legacy = {"name": "owner", "value": "pay(?!ments)", "regex": True, "equal": False}
        silence = Silence.model_validate(
            {"id": "legacy", "created_at": 0, "starts_at": 0, "ends_at": 4_000_000_000, "created_by": "ana",
             "comment": "c", "matchers": [legacy]}, context={STORED_CONTEXT: True})
        await store.r.hset(SILENCES, "legacy", silence.model_dump_json())
        listed = (await http.get("/v1/silences")).json()
        assert [(s["id"], s["matchers"][0]["usable"]) for s in listed] == [("legacy", False)]
        assert (await http.get("/v1/silences/legacy")).status_code == 200
        active = await SilenceStore(store.r).active(datetime.now(UTC))
        assert [s.id for s in active] == ["legacy"]
        assert silencing(active, {"model": "m", "owner": "payroll"}, datetime.now(UTC)) == []
        assert (await http.delete("/v1/silences/legacy")).json()["state"] == "expired"

        receiver = Receiver.model_validate(
            {**receiver_body(legacy), "id": "legacy-r", "created_at": 0}, context={STORED_CONTEXT: True})
        await store.r.hset(RECEIVERS, "legacy-r", receiver.model_dump_json())
        shown = (await http.get("/v1/receivers/legacy-r")).json()
        assert shown["matchers"][1] == {**legacy, "usable": False}
        [stored] = await ReceiverStore(store.r).all()
        alert = Alert.model_construct(model_id="m", feature="x", check="psi", severity="warning",
                                      owner="payroll", routing={"team": "pay"})
        assert not stored.matches(alert)
        assert (await http.delete("/v1/receivers/legacy-r")).status_code == 204
    finally:
        await store.close()
