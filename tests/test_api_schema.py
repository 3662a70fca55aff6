"""The API against its own OpenAPI schema (schemathesis, property-based).

Every operation of the schema gets a bounded number of generated requests
(the schema's own examples first, then random valid and invalid ones), sent
in-process to the ASGI app on a real Redis (the ``store`` fixture's server,
flushed and seeded with one model) with authentication off. Each response
must not be a 5xx, must have a documented status code and content type, and
must match the documented response schema. Generation is deterministic
(``derandomize``) and does not shrink, so a run takes the same time each time
(about 20 s) and a failure is reproducible.

Bodies are widened beyond the schema (``flatmap_body``): besides what the schema
generates, a body may have a number replaced by one JSON cannot hold or a float
cannot (``NaN``, ``Infinity``, ``1e400``, ``10**400``, ``2**64``) or an unknown field
added, at its top or in a nested object; all must be answered 4xx, never 5xx.

``POST /v1/ingest`` is included: invalid batches are answered without Kafka;
the valid ones (the schema's example) go to the session's broker.
``POST /v1/receivers`` resolves the receiver's host: the test keeps that check
but refuses host names before any DNS look-up (IP literals still take the real
check), so no query leaves the machine.
"""

from __future__ import annotations

import ipaddress
import json
import math
from typing import Any
from urllib.parse import urlsplit

import numpy as np
import pytest
import pytest_asyncio
import schemathesis
from hypothesis import HealthCheck, Phase
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.python import asgi
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.transport.asgi import ASGI_TRANSPORT
from schemathesis.transport.requests import REQUESTS_TRANSPORT
from schemathesis.transport.serialization import serialize_json

from sdk.record import PredictionRecord
from service.api import receivers as receivers_api
from service.api.app import create_app
from service.profiles.keys import profile_key, window_index_key, window_member
from service.profiles.reference import build_reference
from service.registry import ModelConfig, PerformanceConfig
from service.settings import Settings
from sketches.profile import WindowProfile

MAX_EXAMPLES = 25
MODEL = "fraud-v3"  # the schema's example model id
T0 = 1_700_006_400
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


def _rows(rng: np.random.Generator, n: int, shift: float = 0.0) -> list[dict]:
    return [{"amount": float(rng.lognormal(3 + shift, 1)), "country": str(rng.choice(["DE", "FR"])),
             "score": float(rng.uniform())} for _ in range(n)]


@pytest_asyncio.fixture
async def seeded(store):
    """The model of the schema's examples (``fraud-v3``: tier 1, labels joined) with a
    reference and three closed windows, so that the examples reach past the 404s."""
    rng = np.random.default_rng(7)
    await store.put_model_config(MODEL, ModelConfig(owner="payments-ml", tier=1,
                                                    performance=PerformanceConfig()))
    await store.put_reference(MODEL, build_reference(MODEL, _rows(rng, 500), "score"))
    for i in range(3):
        start = T0 + 300 * i
        p = WindowProfile(MODEL, start, 300)
        p.add_records([PredictionRecord(MODEL, "3", f"{i}-{k}", start + 1.0, row)
                       for k, row in enumerate(_rows(rng, 200, shift=0.5 * i))])
        member = window_member(300, start, "3")
        await store.r.set(profile_key(MODEL, member), p.to_bytes())
        await store.r.zadd(window_index_key(MODEL), {member: start})
    return store


@pytest.fixture
def api_app(settings, seeded, monkeypatch):
    """The app under test, with its own Redis client: it runs on the event loop
    thread schemathesis sends ASGI requests on, not on the test's loop."""
    real_check_url = receivers_api.check_url

    async def no_dns_check_url(url, allow=()):
        host = urlsplit(url).hostname or ""
        try:
            ipaddress.ip_address(host)
        except ValueError:
            raise OSError(f"{host!r} not resolved in tests") from None
        return await real_check_url(url, allow)

    monkeypatch.setattr(receivers_api, "check_url", no_dns_check_url)
    app = create_app(settings.model_copy(update={"api_auth": False}))
    yield app
    # Run the app's shutdown (its Redis client and ingest producer close) now, not at exit.
    shutdown = getattr(asgi, "shutdown_lifespans", None)
    if shutdown is not None:
        shutdown()


# The schema is the app's own; generating it needs no Redis nor environment (so it can be built at import,
# as schemathesis' pytest integration wants). Requests go to the `api_app` fixture's app.
schema = schemathesis.openapi.from_dict(create_app(Settings.model_construct()).openapi())


# Numbers no request may carry into a stored value: non-finite ones (what json.loads makes of
# NaN, Infinity and 1e400), and integers no float or 64-bit integer holds.
EXTREME_NUMBERS = [math.nan, math.inf, -math.inf, 10**400, -(10**400), 2**64, -(2**64) - 1]


def _paths(value: Any, path: tuple = ()) -> tuple[list[tuple], list[tuple]]:
    """Paths to every number and to every object of a JSON value."""
    numbers, objects = [], []
    if isinstance(value, dict):
        objects.append(path)
        items = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        if isinstance(value, int | float) and not isinstance(value, bool):
            numbers.append(path)
        items = ()
    for k, v in items:
        n, o = _paths(v, (*path, k))
        numbers += n
        objects += o
    return numbers, objects


def _replace(value: Any, path: tuple, new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: _replace(value[head], rest, new)}
    return [_replace(v, rest, new) if i == head else v for i, v in enumerate(value)]


def _get(value: Any, path: tuple) -> Any:
    for p in path:
        value = value[p]
    return value


@st.composite
def _widened(draw: st.DrawFn, body: Any) -> Any:
    """``body``, or with one number made extreme, or with an unknown field in one object."""
    numbers, objects = _paths(body)
    kind = draw(st.sampled_from(["as is", "number", "unknown field"]))
    if kind == "number" and numbers:
        return _replace(body, draw(st.sampled_from(numbers)), draw(st.sampled_from(EXTREME_NUMBERS)))
    if kind == "unknown field" and objects:
        path = draw(st.sampled_from(objects))
        extra = draw(st.sampled_from([1, "x", None, 10**400]))
        return _replace(body, path, {**_get(body, path), "unexpected_field": extra})
    return body


@schema.hook
def flatmap_body(_context, body):
    return _widened(body)


def _json_with_non_finite(_ctx, value):
    """JSON bodies as ``json.dumps`` writes them, NaN and Infinity included (the HTTP client
    refuses to serialize those)."""
    if isinstance(value, dict | list):
        return {"data": json.dumps(value).encode(), "headers": {"Content-Type": "application/json"}}
    return serialize_json(value)


@pytest.fixture(scope="module", autouse=True)
def non_finite_json():
    ASGI_TRANSPORT.serializer("application/json")(_json_with_non_finite)
    yield
    ASGI_TRANSPORT.serializer("application/json")(REQUESTS_TRANSPORT._serializers["application/json"])


@schema.parametrize()
@hypothesis_settings(max_examples=MAX_EXAMPLES, deadline=None, phases=[Phase.explicit, Phase.generate],
          suppress_health_check=list(HealthCheck), derandomize=True)
def test_api_conforms_to_its_schema(case, api_app):
    case.call_and_validate(app=api_app, checks=CHECKS)


def _untyped(spec: dict[str, Any], node: Any, seen: frozenset[str] = frozenset()) -> bool:
    """Whether a response schema leaves its body (or the items of a list body) undescribed:
    no schema, ``{}``, or an object with no properties (``dict[str, Any]``)."""
    if not isinstance(node, dict) or not node:
        return True
    ref = node.get("$ref")
    if ref is not None:
        if ref in seen:
            return False
        return _untyped(spec, _get(spec, tuple(ref.removeprefix("#/").split("/"))), seen | {ref})
    if "anyOf" in node or "oneOf" in node:
        return any(_untyped(spec, n, seen) for n in node.get("anyOf", node.get("oneOf")))
    if node.get("type") == "array":
        return _untyped(spec, node.get("items"), seen)
    if node.get("type") == "object" or "properties" in node or "additionalProperties" in node:
        return not node.get("properties")
    return "type" not in node and "enum" not in node and "const" not in node


def test_every_answer_of_every_route_has_a_typed_schema():
    spec = create_app(Settings.model_construct()).openapi()
    untyped = []
    for path, operations in spec["paths"].items():
        for method, op in operations.items():
            for status, response in op["responses"].items():
                if not status.startswith("2") or status == "204":
                    continue
                for media, body in response.get("content", {"": {}}).items():
                    if media == "application/json" and _untyped(spec, body.get("schema")):
                        untyped.append(f"{method.upper()} {path} {status}")
    assert untyped == [], "undocumented answers (declare a response_model): " + ", ".join(untyped)


def test_an_untyped_route_fails_the_schema_check():
    from fastapi import FastAPI

    app = FastAPI()

    @app.get("/loose")
    async def loose() -> dict[str, Any]:
        return {}

    @app.get("/loose-list")
    async def loose_list() -> list[dict[str, Any]]:
        return []

    spec = app.openapi()
    schemas = [op["get"]["responses"]["200"]["content"]["application/json"]["schema"]
               for op in spec["paths"].values()]
    assert [_untyped(spec, s) for s in schemas] == [True, True]
