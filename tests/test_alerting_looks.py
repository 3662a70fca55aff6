"""Looks at open windows: a data-quality break pages before its window closes, the close
confirms or withdraws the alert, and nothing pages twice (real Redis)."""

from __future__ import annotations

import re

import pytest

from sdk.columns import RecordColumns
from sdk.record import PredictionRecord
from service.alerting.keys import EVENTS, looks_key
from service.alerting.models import Alert
from service.alerting.policy import AlertPolicy, WindowRef
from service.alerting.store import AlertStore
from service.profiles.aggregator import _add_looking
from service.profiles.checkpoints import PartitionCheckpoint
from service.profiles.keys import (
    WINDOWS_STREAM,
    pending_key,
    window_index_key,
    window_looks_key,
    window_member,
)
from service.profiles.looks import LOOK_RECORDS, WindowLook
from service.profiles.partition import PartitionState
from service.registry import ModelConfig
from sketches.feature import QualityCounts
from sketches.profile import WindowProfile
from tests.test_alerting_policy import BREACH, HEALTHY, T0, W, apply, policy, result, window

BREAK = (0.9, 1e-60)  # a null-rate jump of 0.9 (floor 0.2): overwhelming at any level
ALERTING = {"x": frozenset({"null_rate"})}


async def look(p: AlertPolicy, model: str, i: int, effect: float, pvalue: float,
               at: float) -> list[Alert] | str:
    return await p.look(window(model, i), [result("x", "null_rate", effect, pvalue)], ALERTING,
                        ModelConfig(), [], 1e9, at)


async def close(store, model: str, i: int) -> None:
    """What the aggregator's publication of window ``i`` does: indexed, pending."""
    member, start = window(model, i).member, T0 + i * W
    await store.r.zadd(window_index_key(model), {member: start})
    await store.r.zadd(pending_key(model), {member: start})


async def events(store) -> list[tuple[str, str]]:
    return [(f[b"kind"].decode(), f[b"alert_id"].decode()) for _id, f in await store.r.xrange(EVENTS)]


async def test_a_break_pages_at_its_look_and_the_close_keeps_the_same_alert(store):
    p, alerts = policy(store), AlertStore(store.r)
    await apply(p, "m", 0, {("x", "null_rate"): HEALTHY})  # a gated window: the level to use
    fired = await look(p, "m", 1, *BREAK, at=T0 + W + 600)
    assert [(a.feature, a.check, a.state, a.fired_window_start) for a in fired] == [
        ("x", "null_rate", "firing", T0 + W)]
    aid = fired[0].id
    assert (await alerts.alert(aid)).fired_at == T0 + W + 600
    again = await look(p, "m", 1, *BREAK, at=T0 + W + 1200)  # a later look: the same alert
    assert [a.id for a in again] == [aid]
    await close(store, "m", 1)
    assert await alerts.looks("m")
    confirmed = await apply(p, "m", 1, {("x", "null_rate"): BREAK})
    assert [(a.id, a.state) for a in confirmed] == [(aid, "firing")]
    stored = await alerts.alert(aid)
    assert stored.fired_at == T0 + W + 600  # the close rewrote the body, not when it fired
    assert await events(store) == [("fired", aid)]  # paged once
    assert await alerts.looks("m") == {}
    assert await look(p, "m", 1, *BREAK, at=T0 + W + 1800) == "applied"


async def test_an_alert_whose_window_closes_without_the_break_is_resolved_then(store):
    p, alerts = policy(store), AlertStore(store.r)
    await apply(p, "n", 0, {("x", "null_rate"): HEALTHY})
    [fired] = await look(p, "n", 1, *BREAK, at=T0 + W + 60)
    await close(store, "n", 1)
    released = await apply(p, "n", 1, {("x", "null_rate"): HEALTHY})
    assert [(a.id, a.state, a.resolved_window_start) for a in released] == [
        (fired.id, "resolved", T0 + W)]
    assert (await alerts.alert(fired.id)).state == "resolved"
    assert await events(store) == [("fired", fired.id), ("resolved", fired.id)]
    assert not await alerts.open_alerts()


async def test_a_look_pages_only_what_is_overwhelming_and_only_with_a_gated_level(store):
    p, alerts = policy(store), AlertStore(store.r)
    assert await look(p, "q", 1, *BREAK, at=T0 + W) == "no_gated_window"
    await apply(p, "q", 0, {("x", "null_rate"): HEALTHY})
    # A discovery by a margin (p near the level), or an effect under its floor: the close decides.
    assert await look(p, "q", 1, 0.9, 1e-7, at=T0 + W) == []
    assert await look(p, "q", 1, 0.1, 1e-60, at=T0 + W) == []
    # Behind the model's earlier windows (one pending, or not yet published): wait.
    await close(store, "q", 1)
    assert await look(p, "q", 2, *BREAK, at=T0 + 2 * W) == "behind"
    assert await p.look(window("q", 3), [result("x", "null_rate", *BREAK)], ALERTING, ModelConfig(), [],
                        1e9, T0 + 3 * W, prior_end=T0 + 3 * W) == "behind"  # window 2: not published
    # A series firing already has nothing new to page.
    await apply(p, "q", 1, {("x", "null_rate"): BREAK})
    assert await look(p, "q", 2, *BREAK, at=T0 + 2 * W + 60) == []
    assert [a.fired_at for a in await alerts.alerts("q", 0, 10)] == [None]  # fired at a close


async def test_a_look_ahead_of_the_policy_times_the_alert_its_window_s_close_fires(store):
    """The policy has not applied the window before (the detectors are behind): the look
    cannot fold ("behind"). The window's close reads its looks again and, firing the series
    at that window, says it fired at the first look that found the break overwhelming at the
    window's level; a close without the break fires nothing, whatever its looks saw."""
    p, alerts = policy(store), AlertStore(store.r)
    await apply(p, "b", 0, {("x", "null_rate"): HEALTHY})
    await close(store, "b", 1)  # closed, not applied
    assert await look(p, "b", 2, *BREAK, at=T0 + 2 * W + 60) == "behind"
    assert not await alerts.alerts("b", 0, 10)  # nothing paged ahead of the fold
    await apply(p, "b", 1, {("x", "null_rate"): HEALTHY})
    await close(store, "b", 2)
    looks = [(T0 + 2 * W + 200, [result("x", "null_rate", *BREAK)]),
             (T0 + 2 * W + 60, [result("x", "null_rate", 0.9, 1e-7)]),  # not overwhelming
             (T0 + 2 * W + 120, [result("x", "null_rate", *BREAK)])]
    [fired] = await p.apply(window("b", 2), [result("x", "null_rate", *BREAK)], ALERTING, ModelConfig(),
                            [], 1e9, None, looks)
    assert fired.fired_window_start == T0 + 2 * W
    assert (await alerts.alert(fired.id)).fired_at == T0 + 2 * W + 120
    assert await events(store) == [("fired", fired.id)]
    await close(store, "q", 1)
    assert await p.apply(window("q", 1), [result("x", "null_rate", *HEALTHY)], ALERTING, ModelConfig(),
                         [], 1e9, None, looks) == []


async def test_the_looks_of_a_window_are_kept_for_its_close(store):
    member = window("k", 1).member
    looks = [WindowLook("k", member, 50, T0 + W + 10.0, {"x": QualityCounts(50, 1, 0)}, T0 + W),
             WindowLook("k", member, 50, T0 + W + 20.0, {"x": QualityCounts(50, 49, 0)}, T0 + W)]
    await store.publish_looks(looks)
    await store.r.rpush(window_looks_key("k", looks[0].member), b'{"records": 0}')  # left out
    assert await store.window_looks("k", looks[0].member) == looks
    assert await store.r.ttl(window_looks_key("k", looks[0].member)) > W
    assert [f[b"member"].decode() for _id, f in await store.r.xrange(WINDOWS_STREAM)] == [looks[0].member] * 2


def test_a_long_message_is_looked_at_where_each_look_falls():
    """350 records in one message, the feature missing from the 150th on: looks after 50,
    100, 150, 200, 250 (then a quarter of the window: 62 more) and 312 records, each counting
    only its own records, each timed by its latest."""
    state = PartitionState(0, PartitionCheckpoint(epoch=1))
    key = ("m", "1", W, T0)
    profile = state.open[key] = WindowProfile("m", T0, W)
    n = 350
    x = [1.0 if i < 150 else None for i in range(n)]
    cols = RecordColumns.from_records(
        "m", [PredictionRecord("m", "1", f"p{i}", T0 + i, {"x": x[i]}) for i in range(n)])
    _add_looking(state, key, profile, cols)
    assert profile.count == n
    assert LOOK_RECORDS == 50
    assert [(lk.records, lk.counts["x"].nulls, lk.at) for lk in state.looked] == [
        (50, 0, T0 + 49), (50, 0, T0 + 99), (50, 0, T0 + 149), (50, 50, T0 + 199),
        (50, 50, T0 + 249), (62, 62, T0 + W)]  # capped at the window's end
    assert all(WindowLook.from_fields(lk.to_fields()) == lk for lk in state.looked)
    # The window's records so far are what its looks counted: nothing counted twice or lost.
    assert sum(lk.counts["x"].total for lk in state.looked) == 312
    assert profile.features["x"].null_count == 200
    # With the window before it still open, a look says the policy must apply that one first.
    assert {lk.prior_end for lk in state.looked} == {0}
    state.open[("m", "1", W, T0 - W)] = WindowProfile("m", T0 - W, W)
    _add_looking(state, key, profile, cols)
    assert state.looked[-1].prior_end == T0


async def test_a_withdrawn_alert_that_fires_later_pages_again(store):
    """A look fires; its window closes with an ordinary breach (not overwhelming: 2 of 3
    not met yet), so the alert is withdrawn; the next window's breach fires the episode,
    the same alert: that is a page ("fired"), timed by its own close, not the old look."""
    p, alerts = policy(store), AlertStore(store.r)
    await apply(p, "r", 0, {("x", "null_rate"): HEALTHY})
    [early] = await look(p, "r", 1, *BREAK, at=T0 + W + 60)
    await close(store, "r", 1)
    await apply(p, "r", 1, {("x", "null_rate"): BREACH})
    assert (await alerts.alert(early.id)).state == "resolved"
    await close(store, "r", 2)
    [again] = await apply(p, "r", 2, {("x", "null_rate"): BREACH})
    assert again.id == early.id and again.state == "firing"
    assert await events(store) == [("fired", early.id), ("resolved", early.id), ("fired", early.id)]
    assert (await alerts.alert(early.id)).fired_at is None  # fired at window 2's close


async def test_a_look_that_loses_the_race_with_its_window_s_close_resolves_its_alert(store):
    """The window's close (healthy) is applied between the look's read and its write: the
    look sees it after writing and resolves what it wrote; nothing stays firing."""
    p, alerts = policy(store), AlertStore(store.r)
    await apply(p, "c", 0, {("x", "null_rate"): HEALTHY})
    read = alerts.look_state
    calls = []

    async def racing(*args, **kwargs):
        state = await read(*args, **kwargs)
        if not calls:
            calls.append(1)
            await close(store, "c", 1)
            await apply(p, "c", 1, {("x", "null_rate"): HEALTHY})
        return state

    p.alerts.look_state = racing
    assert await look(p, "c", 1, *BREAK, at=T0 + W + 60) == []
    assert [a.state for a in await alerts.alerts("c", 0, 10)] == ["resolved"]
    assert not await alerts.open_alerts()


async def test_a_close_that_cannot_decide_keeps_what_its_looks_saw(store):
    """The window's close has no result for the series (its evaluation failed): the look's
    breach is the window's outcome, so the alert stays firing and resolves as any other."""
    p, alerts = policy(store), AlertStore(store.r)
    await apply(p, "u", 0, {("x", "null_rate"): HEALTHY})
    [early] = await look(p, "u", 1, *BREAK, at=T0 + W + 60)
    await close(store, "u", 1)
    await apply(p, "u", 1, {})
    assert (await alerts.alert(early.id)).state == "firing"
    for i in (2, 3, 4):
        await close(store, "u", i)
        await apply(p, "u", i, {("x", "null_rate"): HEALTHY})
    assert (await alerts.alert(early.id)).state == "resolved"
    assert await events(store) == [("fired", early.id), ("resolved", early.id)]


async def test_another_version_s_window_at_the_same_start_holds_the_look_back(store):
    p = policy(store)
    await apply(p, "v", 0, {("x", "null_rate"): HEALTHY})
    other = WindowRef("v", window_member(W, T0 + W, "2"), T0 + W, W, "2")
    await store.r.zadd(window_index_key("v"), {other.member: other.start})
    await store.r.zadd(pending_key("v"), {other.member: other.start})
    assert await look(p, "v", 1, *BREAK, at=T0 + W + 60) == "behind"


def test_a_look_event_that_does_not_parse_names_its_field():
    base = {"model": "m", "member": "3600:0:1"}
    for body, field in (('{"records": 1, "at": 1' + "0" * 400 + ', "q": {}}', "look.at"),
                        ('{"records": 1, "at": 1, "q": ' + "[" * 100_000 + "]" * 100_000 + "}", "look:"),
                        ('{"records": 1, "at": 1, "q": {"x": [1, 2, 1e999]}}', "look.q.x"),
                        ('{"records": 1, "at": 1, "q": {"x": [1, 2, 0]}}', "look.q.x"),
                        ('{"records": 1, "at": 1, "q": {}, "prior": 1e3}', "look.prior")):
        with pytest.raises(ValueError, match=f"^{re.escape(field)}"):
            WindowLook.from_fields({**base, "look": body})


async def test_an_episode_that_fires_after_its_look_s_window_keeps_its_own_time(store):
    """A look fires at window 1; window 1 closes with an ordinary breach and window 2 with
    another, applied out of order: 2 of 3 fires the episode at window 2, so the alert is
    timed by window 2's close, not by window 1's look."""
    p, alerts = policy(store), AlertStore(store.r)
    await apply(p, "o", 0, {("x", "null_rate"): HEALTHY})
    [early] = await look(p, "o", 1, *BREAK, at=T0 + W + 60)
    await close(store, "o", 1)
    await close(store, "o", 2)
    assert await apply(p, "o", 2, {("x", "null_rate"): BREACH}) == []  # window 1 pending
    await apply(p, "o", 1, {("x", "null_rate"): BREACH})
    stored = await alerts.alert(early.id)
    assert (stored.state, stored.fired_window_start, stored.fired_at) == ("firing", T0 + 2 * W, None)
    assert await events(store) == [("fired", early.id)]


async def test_a_window_keeps_its_first_looks_only(store):
    member = window("t", 1).member
    looks = [WindowLook("t", member, 50, T0 + W + i, {}, T0 + W) for i in range(80)]
    await store.publish_looks(looks)
    assert [lk.at for lk in await store.window_looks("t", member)] == [T0 + W + i for i in range(64)]
    await store.forget_window_looks("t", member)
    assert await store.window_looks("t", member) == []


async def test_a_window_the_policy_failed_on_keeps_what_its_looks_saw(store):
    """Released after a policy error, the window's outcome is its look's breach (as when its
    close decides nothing): the alert the look fired stays firing at the next healthy window
    and resolves as any other, rather than being withdrawn as if the window closed healthy."""
    p, alerts = policy(store), AlertStore(store.r)
    await apply(p, "f", 0, {("x", "null_rate"): HEALTHY})
    [early] = await look(p, "f", 1, *BREAK, at=T0 + W + 60)
    await close(store, "f", 1)
    await p.release("f", T0 + W, window("f", 1).member)
    await close(store, "f", 2)
    await apply(p, "f", 2, {("x", "null_rate"): HEALTHY})
    assert (await alerts.alert(early.id)).state == "firing"
    for i in (3, 4):
        await close(store, "f", i)
        await apply(p, "f", i, {("x", "null_rate"): HEALTHY})
    assert (await alerts.alert(early.id)).state == "resolved"
    assert await events(store) == [("fired", early.id), ("resolved", early.id)]
    assert await alerts.looks("f") == {}


async def test_a_window_with_unparseable_looks_is_released_without_them(store, caplog):
    p = policy(store)
    await apply(p, "g", 0, {("x", "null_rate"): HEALTHY})
    await close(store, "g", 1)
    await store.r.hset(looks_key("g"), "some-alert", b"not json")
    await p.release("g", T0 + W, window("g", 1).member)
    assert "do not parse" in caplog.text
    assert await store.r.zscore(pending_key("g"), window("g", 1).member) is None  # released
