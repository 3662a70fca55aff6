"""The fleet as the volume test's control, on a real Redis: windows published through the
aggregators' checkpoint protocol record the fleet's traffic; a model's first-day window
is judged through the other models' records in the same hours, and the detector waits
for the fleet to close a window before it judges one that way."""

from __future__ import annotations

import asyncio
import json
import re

import numpy as np
import pytest

from detectors.quality.volume import volume_test
from detectors.volume_fleet import MAX_SHARE
from sdk.record import PredictionRecord
from service.detection.detector import Detector
from service.profiles.checkpoints import ClosedWindow
from service.profiles.evaluation import (
    UNSETTLED,
    evaluate_member,
    resolve_baseline,
    service_config,
)
from service.profiles.keys import (
    WINDOWS_STREAM,
    results_key,
    traffic_key,
    traffic_through_key,
    window_member,
)
from service.profiles.reference import build_reference
from sketches.profile import WindowProfile
from tests.metric_samples import sample

HOUR = 3_600
FRIDAY = 1_704_412_800  # 2024-01-05 00:00 UTC
TOPIC = "pred"
MODELS = [f"m{i:02d}" for i in range(20)]
DROP_HOUR = 8


def rate(hour: int) -> float:
    """The fleet's daily wave: x0.6 at 02:00 to x1.4 at 14:00 UTC."""
    return 1 + 0.4 * np.sin(2 * np.pi * (hour - 8) / 24)


def traffic(seed: int = 0) -> dict[str, list[int]]:
    """Records per model and hour, hours 0 to DROP_HOUR: every model on the fleet's wave,
    its own level; m00 loses 70 % of its traffic at DROP_HOUR."""
    rng = np.random.default_rng(seed)
    levels = rng.uniform(150, 300, len(MODELS))
    out = {m: [int(rng.poisson(level * rate(h))) for h in range(DROP_HOUR + 1)]
           for m, level in zip(MODELS, levels, strict=True)}
    out["m00"][DROP_HOUR] = int(rng.poisson(0.3 * levels[0] * rate(DROP_HOUR)))
    return out


def window(model_id: str, start: int, n: int) -> ClosedWindow:
    p = WindowProfile(model_id, start, HOUR)
    p.add_records([PredictionRecord(model_id, "1", f"{start}-{i}", start + 1.0, {"x": float(i % 7)})
                   for i in range(n)])
    return ClosedWindow(model_id, window_member(HOUR, start, "1"), start, p.to_bytes(), n)


async def close(store, windows: list[ClosedWindow]) -> None:
    """Publish ``windows`` as an aggregator does (the checkpoint protocol)."""
    cp = await store.acquire_partition(TOPIC, 0)
    assert await store.checkpoint(TOPIC, 0, cp.epoch, {}, [], windows, 8 * 86_400) is not None


async def fleet(store, counts: dict[str, list[int]], hours: range, models=MODELS) -> None:
    for h in hours:
        await close(store, [window(m, FRIDAY + h * HOUR, counts[m][h]) for m in models])


async def history(settings, store, model_id: str, hour: int):
    start = FRIDAY + hour * HOUR
    current = await store.window_profile(model_id, window_member(HOUR, start, "1"))
    r = await resolve_baseline(store, settings, model_id, current, service_config(settings))
    return current.count, r.volume_history


async def volume_result(store, model_id: str, member: str) -> list[dict]:
    return [r for r in json.loads(await store.r.get(results_key(model_id, member))) if r["check"] == "volume"]


async def test_a_first_morning_drop_is_judged_through_the_fleets_records(settings, store):
    counts = traffic()
    await store.put_reference("m00", build_reference("m00", [{"x": float(i % 7)} for i in range(700)]))
    await fleet(store, counts, range(DROP_HOUR + 1))
    stored = await store.r.hgetall(traffic_key(HOUR, FRIDAY + DROP_HOUR * HOUR))
    assert {json.loads(k)[0]: int(v) for k, v in stored.items()} == {
        m: c[DROP_HOUR] for m, c in counts.items()}
    assert await store.fleet_unsettled(HOUR, FRIDAY + DROP_HOUR * HOUR) == 0

    count, h = await history(settings, store, "m00", DROP_HOUR)
    assert h.source == "fleet" and h.alternative.source == "trailing"
    assert "through the records of 19 other models" in h.note
    floor = service_config(settings).floors["volume"]
    through_fleet = volume_test(count, h, floor=floor)
    by_line = volume_test(count, h.alternative, floor=floor)
    assert through_fleet.status.value == "drift" and through_fleet.effect_size < -0.6
    assert through_fleet.p_value * 10 < by_line.p_value
    # the fleet's share knows the level: its expectation is within 5 % of the model's own
    # hours scaled by the wave, where the line extrapolates a morning ramp
    level = sum(counts["m00"][:DROP_HOUR]) / sum(rate(k) for k in range(DROP_HOUR))
    assert h.expectation(floor).expected == pytest.approx(level * rate(DROP_HOUR), rel=0.05)

    count, h = await history(settings, store, "m01", DROP_HOUR)  # a clean model
    clean = volume_test(count, h, floor=floor)
    assert h.source == "fleet" and clean.status.value == "ok" and abs(clean.effect_size) < 0.1


async def test_without_ten_comparable_models_there_is_no_control_and_the_line_answers(settings, store):
    counts = traffic(1)
    few = MODELS[:9]
    await fleet(store, counts, range(DROP_HOUR + 1), few)
    _count, h = await history(settings, store, "m00", DROP_HOUR)
    assert h.source == "trailing"
    assert "no fleet control: the largest of 8 comparable models holds" in h.note
    assert f"(at most {100 * MAX_SHARE:.0f} %)" in h.note


async def test_the_detector_waits_for_the_fleet_to_close_the_window(settings, store):
    counts = traffic(2)
    await store.put_reference("m00", build_reference("m00", [{"x": float(i % 7)} for i in range(700)]))
    await fleet(store, counts, range(DROP_HOUR))
    start = FRIDAY + DROP_HOUR * HOUR
    member = window_member(HOUR, start, "1")
    late = "m19"
    await close(store, [window(m, start, counts[m][DROP_HOUR]) for m in MODELS if m != late])
    assert await store.fleet_unsettled(HOUR, start) == 1
    detector = Detector(settings, store)
    assert await detector.evaluate("m00", member, wait_for_fleet=True) is None
    assert not await store.r.exists(results_key("m00", member))
    assert await evaluate_member(store, settings, "m00", member, wait_for_fleet=True) == UNSETTLED

    stop = asyncio.Event()
    running = asyncio.create_task(detector.run(stop))
    try:
        async def until(condition) -> None:
            async with asyncio.timeout(30):
                while not await condition():
                    await asyncio.sleep(0.05)

        async def only_the_hour_waits() -> bool:  # the 19 models' windows at 08:00
            return (await store.r.xlen(WINDOWS_STREAM) == len(MODELS) - 1
                    and sample("fleetwatch_detector_windows_waiting") == len(MODELS) - 1)

        await until(only_the_hour_waits)
        assert not await store.r.exists(results_key("m00", member))
        await close(store, [window(late, start, counts[late][DROP_HOUR])])

        async def all_evaluated() -> bool:
            return await store.r.xlen(WINDOWS_STREAM) == 0

        await until(all_evaluated)
        assert sample("fleetwatch_detector_windows_waiting") == 0
    finally:
        stop.set()
        await running
    [volume] = await volume_result(store, "m00", member)
    assert volume["status"] == "drift" and "through the records of 19 other models" in volume["reason"]


async def test_a_window_the_fleet_never_closes_is_judged_when_the_wait_is_over(settings, store):
    """A model that went silent (it closed 07:00 and never 08:00) holds the fleet's window
    for ``detector_fleet_wait_seconds``; then the window is judged with the models that
    closed it."""
    patient = settings.model_copy(update={"detector_fleet_wait_seconds": 0.5})
    counts = traffic(3)
    await fleet(store, counts, range(DROP_HOUR))
    start = FRIDAY + DROP_HOUR * HOUR
    member = window_member(HOUR, start, "1")
    await close(store, [window(m, start, counts[m][DROP_HOUR]) for m in MODELS[:-1]])
    stop = asyncio.Event()
    detector = Detector(patient, store)
    running = asyncio.create_task(detector.run(stop))
    try:
        async with asyncio.timeout(30):
            while await store.r.xlen(WINDOWS_STREAM):
                await asyncio.sleep(0.05)
    finally:
        stop.set()
        await running
    assert await store.fleet_unsettled(HOUR, start) == 1
    [volume] = await volume_result(store, "m00", member)
    assert "through the records of 18 other models" in volume["reason"]


async def test_a_window_judged_before_the_fleet_closed_it_does_not_fix_its_control(settings, store):
    """Judged early (the wait at 0, or over), a window is judged with the models that had
    closed it; once more have, the next model's window there reads them all, and a model
    that closed late is never taken for one of the records it is judged through."""
    counts = traffic(4)
    await fleet(store, counts, range(DROP_HOUR))
    start = FRIDAY + DROP_HOUR * HOUR
    early, late = MODELS[:15], MODELS[15:]
    await close(store, [window(m, start, counts[m][DROP_HOUR]) for m in early])
    _count, h = await history(settings, store, "m00", DROP_HOUR)
    assert h.source == "fleet" and "through the records of 14 other models" in h.note
    await close(store, [window(m, start, counts[m][DROP_HOUR]) for m in late])
    others = []
    for model_id in ("m00", late[0]):
        _count, h = await history(settings, store, model_id, DROP_HOUR)
        others.append(int(re.search(r"through the records of (\d+) other models", h.note).group(1)))
    # m00 is judged through the 19 others; m15 through 18: m00, in its drop, does not move
    # with the fleet and is no denominator of anyone's share
    assert others == [19, 18]


async def test_a_deleted_model_is_no_longer_waited_for(store):
    """A model deleted after closing a window leaves the fleet's closed-through set: the
    next window does not wait for it to close."""
    start = 1_700_002_800
    await store.r.zadd(traffic_through_key(3600), {"gone": start, "kept": start})
    assert await store.fleet_unsettled(3600, start + 3600) == 2
    await store.delete_model("gone")
    assert await store.fleet_unsettled(3600, start + 3600) == 1
    assert await store.r.zscore(traffic_through_key(3600), "kept") == start
