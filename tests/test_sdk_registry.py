"""Model registration and reference upload from the SDK, against the API served
over real HTTP (uvicorn) on a real Redis."""

from __future__ import annotations

import asyncio
import json
import urllib.error

import numpy as np
import pandas as pd
import pytest

from sdk import PiiPolicy, register_model, upload_reference
from service.profiles.keys import config_key


async def test_register_model_declares_feature_types_and_lineage(api_url, store):
    features = {"amount": {"type": "numeric", "source": "payments"},
                "country": {"type": "categorical", "source": "geoip"}, "is_new": {"type": "boolean"}}
    answer = await asyncio.to_thread(register_model, api_url, "fraud v2", features=features,
                                     window_seconds=3600, owner="risk")
    assert answer["model_id"] == "fraud v2"
    assert answer["config"]["features"]["is_new"] == {"type": "boolean", "source": None}
    stored = json.loads(await store.r.get(config_key("fraud v2")))
    assert stored["features"]["amount"] == {"type": "numeric", "source": "payments"}
    assert stored["window_seconds"] == 3600 and stored["owner"] == "risk"
    # readers of the stored configuration (the aggregator) still parse it
    assert (await store.model_configs(["fraud v2"]))["fraud v2"].window_seconds == 3600


async def test_register_model_sets_every_section_and_never_resets_what_it_was_not_given(api_url, store):
    first = await asyncio.to_thread(
        register_model, api_url, "fraud", tier=1, owner="risk", window_seconds=60,
        performance={"threshold": 0.7, "label_horizon_seconds": 3600}, persistence={"k": 1, "m": 1},
        routing={"team": "payments"}, slice_features=["country"], max_slice_values=50,
        features={"amount": {"type": "numeric", "source": "payments"}})
    config = first["config"]
    assert (config["tier"], config["owner"], config["window_seconds"]) == (1, "risk", 60)
    assert config["performance"]["threshold"] == 0.7 and config["persistence"]["k"] == 1
    assert (config["slice_features"], config["max_slice_values"]) == (["country"], 50)
    # a second call changes what it is given and keeps everything else
    second = await asyncio.to_thread(register_model, api_url, "fraud", routing={"channel": "#fraud"},
                                     features={"country": {"type": "categorical"}})
    config = second["config"]
    assert (config["tier"], config["owner"], config["window_seconds"]) == (1, "risk", 60)
    assert (config["performance"]["threshold"], config["performance"]["label_horizon_seconds"]) == (0.7, 3600)
    assert config["routing"] == {"team": "payments", "channel": "#fraud"}
    assert set(config["features"]) == {"amount", "country"}
    stored = (await store.model_configs(["fraud"]))["fraud"]
    assert stored.tier == 1 and stored.performance is not None and stored.persistence.m == 1
    with pytest.raises(urllib.error.HTTPError) as exc:
        await asyncio.to_thread(register_model, api_url, "fraud", tier=7)
    assert (exc.value.code, json.loads(exc.value.read())["field"]) == (422, "tier")
    assert (await store.model_configs(["fraud"]))["fraud"] == stored


async def test_register_model_sets_the_windows_time_zone(api_url):
    answer = await asyncio.to_thread(register_model, api_url, "daily", window_seconds=86_400,
                                     window_alignment="iso_week", window_timezone="Europe/Berlin")
    config = answer["config"]
    assert (config["window_seconds"], config["window_alignment"], config["window_timezone"]) == (
        86_400, "iso_week", "Europe/Berlin")
    for zone, seconds in (("Europe/Nowhere", None), ("Europe/Berlin", 7_200)):
        with pytest.raises(urllib.error.HTTPError) as exc:
            await asyncio.to_thread(register_model, api_url, "daily", window_timezone=zone,
                                    window_seconds=seconds)
        assert (exc.value.code, json.loads(exc.value.read())["field"]) == (422, "window_timezone")


async def test_register_model_refuses_an_unknown_feature_type_naming_the_field(api_url):
    with pytest.raises(urllib.error.HTTPError) as exc:
        await asyncio.to_thread(register_model, api_url, "m", features={"x": {"type": "float"}})
    assert exc.value.code == 422
    assert json.loads(exc.value.read())["field"] == "features.x.type"


async def test_reference_from_dataframe_arrays_or_dicts_with_the_pii_policy(api_url):
    rng = np.random.default_rng(3)
    n = 500
    frame = pd.DataFrame({"amount": rng.lognormal(3, 1, n), "country": rng.choice(["DE", "FR"], n),
                          "email": [f"u{i}@example.com" for i in range(n)], "score": rng.uniform(0, 1, n)})
    policy = PiiPolicy(drop=["email"], hash=["country"], secret="s")
    inputs = {
        "dataframe": frame,
        "arrays": {c: frame[c].to_numpy() for c in frame.columns},
        "dicts": frame.to_dict(orient="records"),
    }
    for kind, data in inputs.items():
        await asyncio.to_thread(register_model, api_url, f"ref-{kind}")
        answer = await asyncio.to_thread(upload_reference, api_url, f"ref-{kind}", data,
                                         score_column="score", pii=policy)
        assert answer["count"] == n and answer["features"] == ["amount", "country"], kind
    matrix = frame[["amount", "score"]].to_numpy()
    await asyncio.to_thread(register_model, api_url, "ref-matrix")
    answer = await asyncio.to_thread(upload_reference, api_url, "ref-matrix", matrix,
                                     feature_names=["amount", "score"], score_column="score")
    assert answer["count"] == n and answer["features"] == ["amount"]
