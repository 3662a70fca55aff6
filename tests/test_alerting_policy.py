"""The alert policy on a real Redis: FDR gate, k-of-m persistence, evidence, auto-resolve,
incidents by lineage, inhibition, silences, idempotency and concurrent replicas."""

from __future__ import annotations

import asyncio
import math
import random
import time

from detectors.fdr.epoch import EpochSpending
from detectors.policy.persistence import ImmediateRule, PersistenceConfig
from detectors.policy.silence import Matcher, SilenceSpec
from detectors.result import TestResult, judged
from service.alerting.fdr import FdrGate
from service.alerting.models import Alert
from service.alerting.policy import AlertPolicy, WindowRef, alert_id
from service.alerting.silences import SilenceStore
from service.alerting.store import AlertStore
from service.profiles.keys import window_member
from service.profiles.store import Store
from service.registry import FeatureDeclaration, ModelConfig
from service.runtime.redis_client import flush

T0 = 1_700_006_400 - 1_700_006_400 % 86_400  # an epoch (UTC day) start
W = 300
PARAMS = EpochSpending(alpha=0.05, slot_seconds=W, min_tests_per_slot=200, max_tests_per_slot=200)
BREACH = (1.0, 1e-8)  # effect (floor 0.2) and p-value of a breach, p not far below the level: k of m
HEALTHY = (0.01, 0.9)


def result(feature: str, check: str, effect: float, p: float) -> TestResult:
    return judged(check, feature, effect, effect, p, 1000, 1000, floor=0.2)


def window(model: str, i: int) -> WindowRef:
    return WindowRef(model, window_member(W, T0 + i * W, "1"), T0 + i * W, W, "1")


def policy(store: Store) -> AlertPolicy:
    return AlertPolicy(AlertStore(store.r), FdrGate(store.r, PARAMS))


async def apply(p: AlertPolicy, model: str, i: int, outcomes: dict[tuple[str, str], tuple[float, float]],
                config: ModelConfig | None = None, silences=(), now: float = 1e9,
                fdr_weights: dict[str, float] | None = None) -> list[Alert]:
    results = [result(f, c, *v) for (f, c), v in outcomes.items()]
    alerting: dict[str, frozenset[str]] = {}
    for f, c in outcomes:
        alerting[f] = alerting.get(f, frozenset()) | {c}
    return await p.apply(window(model, i), results, alerting, config or ModelConfig(),
                         list(silences), now, fdr_weights)


def view(alerts: list[Alert]) -> set[tuple]:
    """What must not depend on timing or replicas. (Which incident of a group key an
    alert joins can: it joins the incident open when it fires.)"""
    return {(a.id, a.model_id, a.feature, a.check, a.state, a.window_start,
             a.fired_window_start, a.evidence_count, a.resolved_window_start, a.severity,
             a.group_key, a.incident_id is not None, a.notify) for a in alerts}


async def test_two_of_three_fires_once_collects_evidence_and_auto_resolves(store):
    p, alerts = policy(store), AlertStore(store.r)
    series = "BHBBHHH"  # fires at window 2 (2 of the last 3), resolves at window 6
    states = []
    for i, code in enumerate(series):
        await apply(p, "m", i, {("x", "psi"): BREACH if code == "B" else HEALTHY})
        states.append([(a.state, a.evidence_count) for a in await alerts.alerts(None, 0, 100)])
    assert states == [[], [], [("firing", 2)], [("firing", 3)], [("firing", 3)], [("firing", 3)],
                      [("resolved", 3)]]
    [a] = await alerts.alerts(None, 0, 100)
    assert a.id == alert_id("m", "x", "psi", window_member(W, T0, "1"))
    assert (a.window_start, a.fired_window_start, a.resolved_window_start) == (
        T0, T0 + 2 * W, T0 + 6 * W)
    assert [e.window_start for e in a.evidence] == [T0, T0 + 2 * W, T0 + 3 * W]
    assert a.severity == "critical"  # effect 5x the floor on a tier-2 model
    [incident] = await alerts.incidents(0, 10)
    assert incident.group_key == "feature:x" and [x.id for x in incident.alerts] == [a.id]
    events = [(e[b"kind"], e[b"alert_id"].decode(), e[b"incident_id"].decode())
              for _id, e in await store.r.xrange("{fw}:alert-events")]
    assert events == [(b"fired", a.id, incident.id), (b"resolved", a.id, incident.id)]
    # A new breach pair after the resolution is a new alert in a new incident.
    await apply(p, "m", 7, {("x", "psi"): BREACH})
    await apply(p, "m", 8, {("x", "psi"): BREACH})
    ids = [x.id for x in await alerts.alerts(None, 0, 100)]
    assert len(ids) == 2 and alert_id("m", "x", "psi", window_member(W, T0 + 7 * W, "1")) in ids
    assert len(await alerts.incidents(0, 10)) == 2


async def test_a_window_applied_twice_or_out_of_order_changes_nothing(store):
    plan = {i: {("x", "psi"): BREACH if i in (1, 2, 3, 8, 9) else HEALTHY,
                ("x", "null_rate"): HEALTHY} for i in range(12)}
    p = policy(store)
    for i in range(12):
        await apply(p, "m", i, plan[i])
    in_order = view(await AlertStore(store.r).alerts(None, 0, 100))
    fdr = {k: await store.r.hgetall(k) for k in (f"{{fw}}:fdr:{T0 // 86_400}:used",
                                                  f"{{fw}}:fdr:{T0 // 86_400}:disc")}
    assert {a[4] for a in in_order} == {"resolved", "firing"} and len(in_order) == 2

    await flush(store.r)
    p = policy(store)
    for i in range(12):  # closed by the aggregator, in order
        await p.alerts.mark_pending("m", window("m", i).member, window("m", i).start)
    order = list(range(12)) + [3, 9, 0]
    random.Random(5).shuffle(order)
    for i in order:
        await apply(p, "m", i, plan[i])
    assert view(await AlertStore(store.r).alerts(None, 0, 100)) == in_order
    # The FDR gate counted every window's tests and discoveries exactly once.
    assert {k: await store.r.hgetall(k) for k in fdr} == fdr
    assert sum(int(v) for v in fdr[f"{{fw}}:fdr:{T0 // 86_400}:used"].values()) == 12 * 2


async def test_three_replicas_decide_exactly_like_one(store, redis_url, redis_is_cluster):
    rng = random.Random(11)
    models = [f"m{j}" for j in range(12)]
    # Breaches in runs, plus borderline p-values the FDR gate must decide on.
    plan = {(m, i): {(f, "psi"): (rng.choice([0.3, 1.0]), rng.choice([1e-30, 1e-7, 3e-5, 0.5]))
                     for f in ("a", "b", "c")} for m in models for i in range(8)}
    configs = {m: ModelConfig(features={f: FeatureDeclaration(type="numeric", source=f"src{j % 3}")
                                        for f in ("a", "b")}) for j, m in enumerate(models)}

    async def run(replicas: int) -> tuple[set, set]:
        await flush(store.r)
        stores = [Store(redis_url, redis_is_cluster) for _ in range(replicas)]
        work = list(plan)
        rng.shuffle(work)
        for m, i in work:  # closed by the aggregator
            await AlertStore(store.r).mark_pending(m, window(m, i).member, window(m, i).start)

        async def replica(k: int) -> None:
            p = policy(stores[k])
            for m, i in work[k::replicas]:
                await apply(p, m, i, plan[(m, i)], configs[m])

        try:
            await asyncio.gather(*(replica(k) for k in range(replicas)))
        finally:
            for s in stores:
                await s.close()
        alerts = AlertStore(store.r)
        fdr = {k: await store.r.hgetall(k) for k in (f"{{fw}}:fdr:{T0 // 86_400}:used",
                                                      f"{{fw}}:fdr:{T0 // 86_400}:disc")}
        return view(await alerts.alerts(None, 0, 10_000)), fdr

    one = await run(1)
    assert len(one[0]) > 10 and {a[4] for a in one[0]} == {"firing", "resolved"}
    assert await run(3) == one


async def test_features_sharing_a_source_fail_as_one_incident_across_models(store):
    p, alerts = policy(store), AlertStore(store.r)
    weather = {"temp": FeatureDeclaration(type="numeric", source="weather_feed"),
               "humid": FeatureDeclaration(type="numeric", source="weather_feed"),
               "price": FeatureDeclaration(type="numeric", source="pricing")}
    a = ModelConfig(features=weather)
    b = ModelConfig(features={"temp": weather["temp"]})
    for i in (0, 1):
        await apply(p, "a", i, {("temp", "psi"): BREACH, ("humid", "psi"): BREACH,
                                ("price", "psi"): HEALTHY}, a)
        await apply(p, "b", i, {("temp", "psi"): BREACH}, b)
        for m in ("c", "d"):  # no declared lineage: the feature name groups
            await apply(p, m, i, {("dist", "psi"): BREACH})
    incidents = {i.group_key: i for i in await alerts.incidents(0, 10)}
    assert set(incidents) == {"source:weather_feed", "feature:dist"}
    src = incidents["source:weather_feed"]
    assert sorted((x.model_id, x.feature) for x in src.alerts) == [
        ("a", "humid"), ("a", "temp"), ("b", "temp")]
    assert src.source == "weather_feed" and "weather_feed" in src.title
    assert sorted(x.model_id for x in incidents["feature:dist"].alerts) == ["c", "d"]


async def test_incidents_group_by_event_time_whatever_the_evaluation_order(store):
    # Model "a" runs ahead: it fires and resolves for a break of source "feed" at windows
    # 0-1, then fires again for another break at windows 20-21. Model "b" is evaluated
    # later in wall time: its alerts for the first break must join the first incident
    # (it was already resolved) and its alert for the second break the second one.
    p, alerts = policy(store), AlertStore(store.r)
    cfg = ModelConfig(features={"x": FeatureDeclaration(type="numeric", source="feed")})
    plan = {i: BREACH if i in (0, 1, 20, 21) else HEALTHY for i in range(25)}
    for i in range(25):
        await apply(p, "a", i, {("x", "psi"): plan[i]}, cfg)
    first_break = {a.incident_id for a in await alerts.alerts(None, 0, 10)}
    assert len(first_break) == 2  # a's two episodes, two breaks apart in event time
    for i in range(25):  # b's breaches start a window later than a's
        await apply(p, "b", i, {("x", "psi"): plan[i - 1] if i else HEALTHY}, cfg)
    incident_of = {(a.model_id, a.window_start): a.incident_id
                   for a in await alerts.alerts(None, 0, 10)}
    assert sorted(incident_of) == [("a", T0), ("a", T0 + 20 * W), ("b", T0 + W), ("b", T0 + 21 * W)]
    assert incident_of["b", T0 + W] == incident_of["a", T0]
    assert incident_of["b", T0 + 21 * W] == incident_of["a", T0 + 20 * W]
    assert len(await alerts.incidents(0, 10)) == 2


async def test_an_alert_far_apart_in_event_time_does_not_join_a_firing_incident(store):
    p, alerts = policy(store), AlertStore(store.r)
    cfg = ModelConfig(features={"x": FeatureDeclaration(type="numeric", source="feed")})
    for i in (0, 1):  # a fires and is still firing
        await apply(p, "a", i, {("x", "psi"): BREACH}, cfg)
    for i in (10, 11):  # c, evaluated meanwhile, breaches 10 windows later in event time
        await apply(p, "c", i, {("x", "psi"): BREACH}, cfg)
    ids = {a.model_id: a.incident_id for a in await alerts.alerts(None, 0, 10)}
    assert ids["a"] != ids["c"] and len(await alerts.incidents(0, 10)) == 2


async def test_data_quality_alert_inhibits_drift_on_its_feature_only(store):
    p = policy(store)
    for i in (0, 1):
        await apply(p, "m", i, {("x", "null_rate"): BREACH, ("x", "psi"): BREACH,
                                ("y", "psi"): BREACH})
    by = {(a.feature, a.check): a for a in await AlertStore(store.r).alerts(None, 0, 10)}
    assert by[("x", "null_rate")].notify and by[("y", "psi")].notify
    assert not by[("x", "psi")].notify
    assert by[("x", "psi")].inhibited_by == [by[("x", "null_rate")].id]


async def test_inhibition_follows_event_time_when_windows_are_released_together(store):
    # Window 0 is pending while windows 1-7 are evaluated, so all eight are released at
    # once: the null-rate alert on x fires (windows 1-2) and resolves (5) inside that
    # release, and psi on x, breaching in the same windows, is still its symptom; psi on
    # x breaching again at windows 20-21, long after, is not.
    p = policy(store)
    for i in range(8):
        await p.alerts.mark_pending("m", window("m", i).member, window("m", i).start)
    dq = {("x", "null_rate"): BREACH, ("x", "psi"): BREACH}
    for i in range(1, 8):
        await apply(p, "m", i, dq if i in (1, 2) else {("x", "null_rate"): HEALTHY, ("x", "psi"): HEALTHY})
    await apply(p, "m", 0, {("x", "null_rate"): HEALTHY, ("x", "psi"): HEALTHY})
    for i in (20, 21):
        await apply(p, "m", i, {("x", "null_rate"): HEALTHY, ("x", "psi"): BREACH})
    by = {(a.check, a.window_start): a for a in await AlertStore(store.r).alerts(None, 0, 10)}
    assert sorted(by) == [("null_rate", T0 + W), ("psi", T0 + W), ("psi", T0 + 20 * W)]
    assert by["psi", T0 + W].inhibited_by == [by["null_rate", T0 + W].id]
    assert by["psi", T0 + 20 * W].inhibited_by == [] and by["psi", T0 + 20 * W].notify


async def test_silenced_alert_is_recorded_but_not_notified(store):
    p = policy(store)
    silences = SilenceStore(store.r)
    now = time.time()  # an alert is read with the silences active at the time of reading
    await silences.create(SilenceSpec(
        matchers=[Matcher(name="model", value="m"), Matcher(name="check", value="ps.", regex=True)],
        starts_at=now - 60, ends_at=now + 3600, created_by="oncall", comment="planned backfill"), now)
    for i in (0, 1):
        await apply(p, "m", i, {("x", "psi"): BREACH, ("x", "null_rate"): HEALTHY},
                    silences=await silences.active(now), now=now)
        await apply(p, "other", i, {("x", "psi"): BREACH}, silences=await silences.active(now), now=now)
    by = {a.model_id: a for a in await AlertStore(store.r).alerts(None, 0, 10)}
    [sid] = [s.id for s in await silences.active(now)]
    assert by["m"].silenced_by == [sid] and not by["m"].notify and by["m"].state == "firing"
    assert by["other"].silenced_by == [] and by["other"].notify


async def test_fdr_gate_shares_slot_capacity_and_rewards_old_discoveries(store):
    params = EpochSpending(alpha=0.05, slot_seconds=W, min_tests_per_slot=10, max_tests_per_slot=10,
                           reward_lag_slots=2)
    gate = FdrGate(store.r, params)
    first = await gate.gate("a", T0, W, [1e-30] * 6)
    again = await gate.gate("a", T0, W, [1e-30] * 6)
    assert (first.granted, again.granted) == (6, 6) and first.level == again.level
    second = await gate.gate("b", T0, W, [1e-30] * 6)  # only 4 of the slot's 10 are left
    assert second.granted == 4 and second.level == params.level(6, 4, 0, 10)
    assert (await gate.gate("c", T0 + W, W, [0.5])).rewarded == 0  # slot 0 is 1 slot old: too recent
    late = await gate.gate("d", T0 + 2 * W, W, [0.5])
    assert late.rewarded == 12 and late.level == params.level(1, 1, 12, 10)
    next_day = await gate.gate("e", T0 + 86_400 + 2 * W, W, [0.5])
    assert next_day.rewarded == 0  # the epoch starts afresh
    # An hour-long window spans 12 slots: its level is 12x, and it claims each slot.
    hourly = await gate.gate("f", T0 + 86_400 + 12 * W, 12 * W, [0.5] * 3)
    assert hourly.granted == 3 and hourly.level == params.level(3, 3, 0, 10, span=12)
    used = await store.r.hgetall(f"{{fw}}:fdr:{T0 // 86_400 + 1}:used")
    assert {int(k): int(v) for k, v in used.items()} == {2: 1, **{s: 3 for s in range(12, 24)}}


async def test_overwhelming_breaches_page_at_their_first_window_subtle_ones_wait(store):
    """A breach with p <= 1e-3 x the gate's level and an effect >= 3 x its floor (a
    data-quality break: >= 1 x) fires at its first window; a discovery by a margin, or a
    large effect at an ordinary p-value, still waits for k of m (2 of 3)."""
    p, alerts = policy(store), AlertStore(store.r)
    # level of a 6-test window: 0.05 / 288 * 6 / 200 = 5.2e-6; 1e-3 of it: 5.2e-9
    first = {("x", "psi"): (0.7, 1e-12),  # 3.5 x floor, p far below: at once
             ("y", "psi"): (0.5, 1e-12),  # 2.5 x floor: waits
             ("z", "psi"): (1.0, 1e-8),  # 5 x floor, p only just below the level: waits
             ("v", "null_rate"): (0.25, 1e-40),  # a null-rate jump (floor 0.2 here): at once
             # volume, a ratio: half the expected records is the fold change of a doubling
             # (1.0 >= 3 x 0.2: at once), a drop of 30 % that of x 1.43 (0.43: waits)
             ("", "volume"): (-0.5, 1e-12), ("w", "volume"): (-0.3, 1e-12)}
    await apply(p, "m", 0, first)
    fired = {(a.feature, a.check): a for a in await alerts.alerts(None, 0, 100)}
    assert set(fired) == {("x", "psi"), ("v", "null_rate"), ("", "volume")}
    assert all(a.fired_window_start == a.window_start == T0 for a in fired.values())
    await apply(p, "m", 1, first)
    assert {(a.feature, a.fired_window_start) for a in await alerts.alerts(None, 0, 100)} == {
        ("x", T0), ("v", T0), ("", T0), ("y", T0 + W), ("z", T0 + W), ("w", T0 + W)}
    # The rule is the deployment's: with it off, the same windows wait for k of m.
    off = AlertPolicy(AlertStore(store.r), FdrGate(store.r, PARAMS),
                      ImmediateRule(effect_ratio=math.inf, quality_effect_ratio=math.inf))
    await apply(off, "n", 0, first)
    assert not await alerts.alerts("n", 0, 100)


async def test_fdr_capacity_follows_what_the_fleet_submits(store):
    """No declared capacity: a slot's capacity is ceil(1.25 x) the most tests the fleet
    submitted to one slot of this or the previous epoch, fixed when the slot is first
    touched, and the same arithmetic as ``EpochSpending.capacity``."""
    params = EpochSpending(alpha=0.05, slot_seconds=W)
    gate = FdrGate(store.r, params)
    # A one-model fleet of 40 tests a window: its level is that of 40 tests, not of 10,000.
    lone = await gate.gate("m0", T0, W, [0.5] * 40)
    assert lone.capacity == params.capacity(40) == 50 and lone.granted == 40
    assert lone.level == 0.05 / 288 * 40 / 50
    # The fleet grows to 100 models of 8 tests in slot 1: slot 1's capacity was fixed by its
    # first window (demand 40), so the growth beyond it in slot 1 goes unfunded ...
    grown = [await gate.gate(f"m{i}:1", T0 + W, W, [0.5] * 8) for i in range(100)]
    assert {d.capacity for d in grown} == {50}
    assert sum(d.granted for d in grown) == 50 and grown[6].granted == 2 and grown[7].level == 0.0
    # ... and slot 2 is sized by slot 1's 800 submitted tests: every model is funded.
    slot2 = [await gate.gate(f"m{i}:2", T0 + 2 * W, W, [0.5] * 8) for i in range(100)]
    assert {d.capacity for d in slot2} == {1000} and all(d.granted == 8 for d in slot2)
    # Re-gating a window returns its first answer (its capacity included).
    assert (await gate.gate("m5:2", T0 + 2 * W, W, [0.5] * 8)).capacity == 1000
    # The fleet shrinks back to one model: the next 7 epochs still remember this epoch's
    # peak (a lower level, never an unfunded test), the eighth forgets it.
    day = 86_400
    assert (await gate.gate("a", T0 + day, W, [0.5] * 8)).capacity == 1000
    assert (await gate.gate("b", T0 + 7 * day, W, [0.5] * 8)).capacity == 1000
    assert (await gate.gate("b8", T0 + 8 * day, W, [0.5] * 8)).capacity == 20  # 8 tests: the floor
    # A floor and a ceiling bound the derived capacity.
    bounded = FdrGate(store.r, EpochSpending(slot_seconds=W, min_tests_per_slot=50,
                                             max_tests_per_slot=60))
    assert (await bounded.gate("c", T0 + 16 * day, W, [0.5] * 8)).capacity == 50
    assert (await bounded.gate("d", T0 + 16 * day + W, W, [0.5] * 2_000)).capacity == 60


async def test_fdr_capacity_holds_when_an_epoch_is_touched_before_the_previous_one(store):
    """Daily windows span every slot of their epoch, and a model whose partition runs
    ahead can have its day D gated while only its own day D - 1 has been (the demo's
    replay did: one carrier's windows a day ahead of the other five). The slot's capacity
    then comes from the epochs before (a week of them), not from that one model: before,
    day D's capacity was 1.25 x its tests and the other models' windows of that day were
    granted nothing, so a 35 % null-rate break waited a day to page."""
    day = 86_400
    params = EpochSpending(alpha=0.05, slot_seconds=W)
    gate = FdrGate(store.r, params)
    for d in range(3):  # three days of a fleet of 6 models x 60 tests: 360 a day
        for m in range(6):
            await gate.gate(f"m{m}:{d}", T0 + d * day, day, [0.5] * 60)
    # model 0 runs a day ahead: its day 3, then its day 4, before the others' day 3
    await gate.gate("m0:3", T0 + 3 * day, day, [0.5] * 60)
    first = await gate.gate("m0:4", T0 + 4 * day, day, [0.5] * 60)
    assert first.capacity == params.capacity(360) == 450
    rest = [await gate.gate(f"m{m}:4", T0 + 4 * day, day, [0.5] * 60) for m in range(1, 6)]
    assert all(d.granted == 60 for d in rest)


async def test_a_cold_start_sizes_its_slots_from_the_registered_fleet_whatever_the_order(store):
    """A new deployment backfills: one model's windows are all gated before the other
    models' (one partition ahead, or one detector replica faster). With no history the
    first window gated used to size every slot it touched (1.25 x its own tests), and the
    other models' windows of those slots were granted nothing. On a cold start a slot is
    sized from the registered fleet instead: models gated already count what they
    submitted, the others as many as the window being gated."""
    params = EpochSpending(alpha=0.05, slot_seconds=W)
    gate = FdrGate(store.r, params)
    await store.r.sadd("{fw}:models", "a", "b", "c")
    ahead = [await gate.gate(f"a:{s}", T0 + s * W, W, [0.5] * 30, model_id="a") for s in range(6)]
    assert {d.capacity for d in ahead} == {params.capacity(90)} and all(d.granted == 30 for d in ahead)
    rest = [await gate.gate(f"{m}:{s}", T0 + s * W, W, [0.5] * 30, model_id=m)
            for m in "bc" for s in range(6)]
    assert all(d.granted == 30 for d in rest)
    # What a model submitted is remembered: a model of 30 tests once gated is counted as 30,
    # not as the window being gated (a 4-test model's first window of slot 6).
    small = await gate.gate("d:6", T0 + 6 * W, W, [0.5] * 4, model_id="d")
    assert small.capacity == params.capacity(4 + 3 * 30)
    # Once an epoch has history, its peaks size the next epoch's slots as before.
    nxt = await gate.gate("a:next", T0 + 86_400, W, [0.5] * 30, model_id="a")
    assert nxt.capacity == params.capacity(90)


async def test_an_unfunded_test_is_never_a_discovery(store):
    """A window granted no share of its slot has level 0: nothing is discovered, not even
    a p-value that underflowed to 0 (before, p = 0 <= 0 passed an unfunded gate)."""
    gate = FdrGate(store.r, EpochSpending(alpha=0.05, slot_seconds=W, max_tests_per_slot=20))
    funded = await gate.gate("full", T0, W, [0.5] * 20)
    assert funded.granted == 20
    starved = await gate.gate("starved", T0, W, [0.0, 1e-300, 0.5])
    assert starved.granted == 0 and starved.level == 0.0
    assert not starved.discoveries.any()


async def test_fdr_weights_move_the_window_level_from_quality_to_drift(store):
    # Two tests per window: BH's first threshold is 0.05 / 288 * (2 / 200) / 2 = 8.7e-7.
    # p = 1.2e-6 misses it with equal weights and clears it when null_rate lends its share.
    p, alerts = policy(store), AlertStore(store.r)
    borderline = {("x", "psi"): (1.0, 1.2e-6), ("x", "null_rate"): HEALTHY}
    for i in (0, 1):
        await apply(p, "uniform", i, borderline)
        await apply(p, "weighted", i, borderline, fdr_weights={"null_rate": 0.1})
    assert [(a.model_id, a.check) for a in await alerts.alerts(None, 0, 10)] == [("weighted", "psi")]


async def test_persistence_config_from_the_model(store):
    p = policy(store)
    config = ModelConfig(persistence=PersistenceConfig(k=1, m=1, resolve_after=1), tier=3)
    await apply(p, "m", 0, {("x", "psi"): BREACH}, config)
    [a] = await AlertStore(store.r).alerts(None, 0, 10)
    assert a.state == "firing" and a.severity == "warning"  # tier 3 never pages critical
    await apply(p, "m", 1, {("x", "psi"): HEALTHY}, config)
    assert [x.state for x in await AlertStore(store.r).alerts(None, 0, 10)] == ["resolved"]


async def test_a_window_pending_for_over_a_day_no_longer_holds_the_model_back(store):
    p = policy(store)
    config = ModelConfig(persistence=PersistenceConfig(k=1, m=1))
    await p.alerts.mark_pending("m", window("m", 0).member, T0)  # its event was lost
    day = 86_400 // W
    assert await apply(p, "m", 1, {("x", "psi"): BREACH}, config) == []  # held back by window 0
    [alert] = await apply(p, "m", day + 1, {("x", "psi"): BREACH}, config)
    assert (alert.window_start, alert.evidence_count) == (T0 + W, 2)  # window 1 released too
    assert await store.r.zcard("fw:{m}:pending") == 0


def test_performance_tests_have_their_own_share_of_the_fdr_budget():
    """q is split between two families, each gated with its own capacity: the feature
    and score tests at q (1 - s), the label-joined performance tests at q s
    (``FLEETWATCH_FDR_PERFORMANCE_SHARE``), so the FDR of the union stays <= q."""
    from service.alerting.fdr import FEATURES, PERFORMANCE, spending
    from service.settings import Settings

    s = Settings(fdr_alpha=0.05, window_seconds=3600)
    features, performance = spending(s, FEATURES), spending(s, PERFORMANCE)
    assert math.isclose(features.alpha + performance.alpha, 0.05)
    assert math.isclose(performance.alpha, 0.05 * s.fdr_performance_share)
    assert 0 < s.fdr_performance_share <= 0.1  # features keep >= 90 % of q


async def test_a_performance_drop_clears_the_gate_of_a_large_fleet(store):
    """Two hundred models submit ~200 feature tests each to an hourly slot (capacity
    ~50,000); a tier-1 model's cohort (AUC drop and log-loss increase) at p 5e-7 --
    the default simulator's concept drifts -- was gated as 2 of those 50,000 tests
    (level ~1e-7) and missed. In its own family it is 2 of the performance tests."""
    from service.settings import Settings

    s = Settings(window_seconds=3600)
    detector = AlertPolicy.for_settings(store.r, s)
    joiner = AlertPolicy.for_settings(store.r, s, family="performance")
    hour = 3600
    await detector.gate.gate("fleet", T0, hour, [0.5] * 40_000)
    cohort = await joiner.gate.gate("m\0cohort", T0, hour, [5e-7, 1e-6], model_id="m")
    assert cohort.discoveries.tolist() == [True, True] and cohort.capacity == 20
    shared = await detector.gate.gate("m\0shared", T0, hour, [5e-7, 1e-6], model_id="m")
    assert not shared.discoveries.any()  # in the features' family it would not clear
    # the families' counters are apart: the features' slot never saw the cohort
    used = await store.r.hget(f"{{fw}}:fdr:{T0 // 86_400}:used", 0)
    assert int(used) == 40_002


async def test_each_fdr_family_has_its_own_metric_series(store):
    """`fleetwatch run` gates both families in one process: their level, capacity and
    counts are series of their own (label ``family``), never one overwriting the other."""
    from service import metrics
    from service.settings import Settings

    def sample(name: str, family: str) -> float:
        return metrics.REGISTRY.get_sample_value(name, {"family": family})

    s = Settings(window_seconds=3600)
    detector = AlertPolicy.for_settings(store.r, s)
    joiner = AlertPolicy.for_settings(store.r, s, family="performance")
    before = {f: sample("fleetwatch_fdr_tests_total", f) for f in ("features", "performance")}
    features = await detector.gate.gate("fleet", T0, 3600, [0.5] * 400)
    cohort = await joiner.gate.gate("m\0cohort", T0, 3600, [5e-7, 1e-6], model_id="m")
    assert sample("fleetwatch_fdr_level", "features") == features.level
    assert sample("fleetwatch_fdr_level", "performance") == cohort.level != features.level
    assert sample("fleetwatch_fdr_capacity", "performance") == cohort.capacity
    assert sample("fleetwatch_fdr_capacity", "features") == features.capacity
    assert sample("fleetwatch_fdr_tests_total", "features") - before["features"] == 400
    assert sample("fleetwatch_fdr_tests_total", "performance") - before["performance"] == 2


async def test_every_new_slot_is_sized_by_the_active_fleet_when_one_model_runs_far_ahead(store):
    """Peaks count what was gated: a replay or a detector catching up can gate one model's
    windows more than the week of look-back ahead of the others', and the slots it touched
    first were sized by its own tests alone, so the other models' windows of those days were
    granted nothing. Every new slot is now sized by the active registered fleet
    too; a model not gated for the look-back's length of wall-clock time counts nothing,
    and an entry that does not parse counts like a model not gated yet."""
    day = 86_400
    params = EpochSpending(alpha=0.05, slot_seconds=W)
    gate = FdrGate(store.r, params)
    await store.r.sadd("{fw}:models", "a", "b", "silent", "odd")
    for m in "ab":
        await gate.gate(f"{m}:0", T0, day, [0.5] * 30, model_id=m)
    await store.r.hset("{fw}:fdr:demand", mapping={"silent": "500:0", "odd": "x:y"})
    ahead = [await gate.gate(f"a:{d}", T0 + d * day, day, [0.5] * 30, model_id="a") for d in range(1, 11)]
    # a, b, and "odd" counted as the window being gated: 90; "silent" not
    assert {d.capacity for d in ahead} == {params.capacity(90)}
    behind = [await gate.gate(f"b:{d}", T0 + d * day, day, [0.5] * 30, model_id="b") for d in range(1, 11)]
    assert [d.granted for d in behind] == [30] * 10
