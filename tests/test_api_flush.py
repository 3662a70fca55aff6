"""POST /v1/models/{id}/flush closes a model's open windows now, in order behind the
records already sent, once (a repeated request changes nothing); unknown models 404."""

from __future__ import annotations

import httpx

from service import metrics
from service.api.app import create_app
from service.profiles.control import FlushRequest, decode_control, is_control
from tests.conftest import wait_for
from tests.metric_samples import sample
from tests.roles import running, window_counts
from tests.test_api_ingest import T0, record

MODEL = "ingested"


async def test_flush_closes_the_open_windows_once(settings, store):
    s = settings.model_copy(update={"idle_close_seconds": 3600.0, "allowed_lateness_seconds": 60})
    app = create_app(s, store)
    async with app.router.lifespan_context(app), running(s, store, "aggregator"):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as http:
            resp = await http.post("/v1/models/nosuch/flush")
            assert (resp.status_code, resp.json()["code"]) == (404, "model_not_found")
            assert (await http.put(f"/v1/models/{MODEL}", json={"window_seconds": 300})).status_code == 200
            # 60 records in [T0, T0+300), 40 in [T0+300, T0+600), and the flush request right
            # behind them: the watermark (the message's median event time less 60 s) closes
            # neither window and there is no idle close for an hour; the flush closes both,
            # after aggregating the records sent before it.
            flushed = sample("fleetwatch_windows_flushed_total")
            resp = await http.post("/v1/ingest", json={"records": [record(i) for i in range(100)]})
            assert resp.status_code == 200, resp.text
            assert await window_counts(store, MODEL) == {}
            resp = await http.post(f"/v1/models/{MODEL}/flush")
            assert resp.status_code == 202, resp.text
            assert set(resp.json()) == {"model_id", "partition", "offset"}

            async def both_closed() -> bool:
                return await window_counts(store, MODEL) == {T0: 60, T0 + 300: 40}
            await wait_for(both_closed)
            assert sample("fleetwatch_windows_flushed_total") == flushed + 2

            # Again: nothing open, nothing closed twice. A record of the flushed window is
            # late; one of a new window opens it, and the next flush closes it alone.
            late = sample("fleetwatch_records_dead_lettered_total", reason=metrics.LATE)
            assert (await http.post(f"/v1/models/{MODEL}/flush")).status_code == 202
            resp = await http.post("/v1/ingest", json={"records": [
                record(500, event_time=T0 + 310.0), record(501, event_time=T0 + 610.0)]})
            assert resp.status_code == 200
            assert (await http.post(f"/v1/models/{MODEL}/flush")).status_code == 202

            async def third_closed() -> bool:
                return await window_counts(store, MODEL) == {T0: 60, T0 + 300: 40, T0 + 600: 1}
            await wait_for(third_closed)
            assert sample("fleetwatch_records_dead_lettered_total", reason=metrics.LATE) == late + 1
            assert sample("fleetwatch_windows_flushed_total") == flushed + 3
            assert len(await store.window_members(MODEL, 0, float("inf"))) == 3


def test_control_messages_are_recognised_and_checked():
    key, value, headers = FlushRequest("m", 5.0).encode()
    assert is_control(headers) and not is_control([("other", b"x")]) and not is_control(None)
    assert decode_control(key, value, headers) == FlushRequest("m", 5.0)
    for bad in [(b"other", value, headers), (key, b"{}", headers), (key, b"not json", headers),
                (key, value, [("fw-control", b"reset")])]:
        try:
            decode_control(*bad)
        except ValueError:
            continue
        raise AssertionError(f"accepted {bad!r}")


async def test_a_backfilling_model_closes_its_windows_soon_after_its_last_record(settings, store):
    s = settings.model_copy(update={"idle_close_seconds": 3600.0, "allowed_lateness_seconds": 60,
                                    "backfill_idle_seconds": 0.5})
    app = create_app(s, store)
    async with app.router.lifespan_context(app), running(s, store, "aggregator"):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as http:
            for model, backfill in (("replayed", True), ("live", False)):
                config = {"window_seconds": 300, "backfill": backfill}
                resp = await http.put(f"/v1/models/{model}", json=config)
                assert resp.status_code == 200, resp.text
            resp = await http.put("/v1/models/weekly", json={
                "window_seconds": 7 * 86_400, "window_alignment": "iso_week", "backfill": True})
            assert resp.status_code == 200, resp.text
            records = [record(i, model_id=m, prediction_id=f"{m}{i}")
                       for m in ("replayed", "live", "weekly") for i in range(100)]
            assert (await http.post("/v1/ingest", json={"records": records})).status_code == 200

            async def replay_closed() -> bool:
                return await window_counts(store, "replayed") == {T0: 60, T0 + 300: 40}
            await wait_for(replay_closed)

            async def week_closed() -> bool:  # T0 is Tuesday 2023-11-14 22:15 UTC
                return await window_counts(store, "weekly") == {1_699_833_600: 100}  # Monday the 13th
            await wait_for(week_closed)
            # The live model's last window waits for its watermark (or an hour idle).
            assert T0 + 300 not in await window_counts(store, "live")
