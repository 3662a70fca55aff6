"""The dashboard end to end in a real headless browser (Debian's Chromium driven by
Playwright): the demo's flights (a stretch of them around the injected weather-feed
fault) replayed through the SDK into the real broker, aggregator, detector, notifier and
API with authentication on; a webhook receiver on loopback gets the pages.

One browser for the module; one context per key (write, read-only). With
``FLEETWATCH_UI_SCREENSHOTS=<folder>`` the tests save a screenshot of each view there
(docs/img holds the ones docs/dashboard.md shows).
"""

from __future__ import annotations

import asyncio
import os
import secrets
import uuid
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
import pytest_asyncio

from service.api.server import ApiServer
from service.demo import run as demo
from service.embedded import free_port
from service.profiles.store import Store
from service.runtime.redis_client import flush
from service.runtime.roles import run_roles
from service.settings import Settings
from tests.conftest import wait_for
from tests.sink import Sink

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
# A week of flights around the fault (2013-03-04 12:00 to 03-11 12:00): enough for the
# reference comparison, the breach, the persistence and the incident, in a fraction of the demo's time.
START = datetime(2013, 3, 1, tzinfo=UTC).timestamp()
END = datetime(2013, 3, 9, tzinfo=UTC).timestamp()
SHOTS = os.environ.get("FLEETWATCH_UI_SCREENSHOTS")
SHOT_MAX_HEIGHT = 1400  # px: the top of long pages, to keep the PNGs small

pytestmark = [
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium (.ci/run installs it)"),
    pytest.mark.timeout(900),
]


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def pipeline(kafka_bootstrap: str, redis_url: str):
    """The whole pipeline with authentication on, fed the demo's flights through the SDK."""
    tag = uuid.uuid4().hex[:8]
    port = free_port()
    admin = secrets.token_urlsafe(32)
    settings = Settings(
        kafka_bootstrap=kafka_bootstrap,
        redis_url=redis_url.rsplit("/", 1)[0] + "/9",
        predictions_topic=f"ui-pred-{tag}",
        dead_letter_topic=f"ui-dlq-{tag}",
        labels_topic=f"ui-lab-{tag}",
        aggregator_group=f"ui-agg-{tag}",
        detector_group=f"ui-det-{tag}",
        joiner_group=f"ui-join-{tag}",
        notifier_group=f"ui-not-{tag}",
        topic_partitions=2,
        api_port=port,
        api_auth=True,
        api_admin_key=admin,
        receiver_allow_nets=["127.0.0.0/8"],
        public_url=f"http://127.0.0.1:{port}",
        **demo.PIPELINE_SETTINGS,
    )
    store = Store(settings.redis_url, settings.redis_cluster)
    await flush(store.r)
    sink = Sink()
    sink_task = asyncio.create_task(sink.server.serve())
    stop = asyncio.Event()
    api = ApiServer(settings, store, port=port)
    roles = asyncio.create_task(run_roles(settings, ("aggregator", "detector", "notifier", "api"), stop,
                                          {"api": api}))
    base = f"http://127.0.0.1:{port}"
    try:
        await wait_for(lambda: _started(api, roles), timeout=30)
        async with httpx.AsyncClient(base_url=base, headers={"X-API-Key": admin}, timeout=60) as http:
            got = await http.post(
                "/v1/receivers",
                json={
                    "name": "on-call hook",
                    "kind": "webhook",
                    "url": f"http://127.0.0.1:{sink.port}/hook",
                    "secret": secrets.token_hex(16),
                    "group_wait_seconds": 0.5,
                },
            )
            assert got.status_code == 201, got.text
            keys = {}
            for scope in ("write", "read"):
                made = await http.post("/v1/keys", json={"name": f"{scope}-user", "scope": scope})
                assert made.status_code == 201, made.text
                keys[scope] = made.json()["token"]
            result = await demo.replay(settings, base, store, api_key=admin, start=START, end=END)
            [fault] = [i for i in result["incidents"] if i["group_key"] == "source:weather_feed"]

            async def paged() -> bool:
                return any(b["incident"]["id"] == fault["id"] for b in sink.bodies)

            await wait_for(paged, timeout=60)
            yield {
                "base": base,
                "settings": settings,
                "admin": admin,
                "keys": keys,
                "result": result,
                "fault": fault,
                "sink": sink,
                "store": store,
            }
    finally:
        stop.set()
        await roles
        sink.server.should_exit = True
        await sink_task
        await store.close()


async def _started(api: ApiServer, roles: asyncio.Task) -> bool:
    if roles.done():
        roles.result()
    return api.server.started


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def browser():
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        b = await p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield b
        await b.close()


async def signed_in(browser, pipeline, scope: str):
    """A browser context signed in with the key of ``scope`` through the login form."""
    ctx = await browser.new_context(viewport={"width": 1280, "height": 900})
    page = await ctx.new_page()
    await page.goto(pipeline["base"] + "/ui")
    assert "/ui/login" in page.url  # not signed in: the login form
    await page.get_by_label("API key").fill(pipeline["keys"][scope])
    await page.get_by_role("button", name="Sign in").click()
    await page.wait_for_url(pipeline["base"] + "/ui")
    return ctx, page


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def writer(browser, pipeline):
    ctx, page = await signed_in(browser, pipeline, "write")
    yield page
    await ctx.close()


async def shot(page, name: str, selector: str | None = None) -> None:
    """Save a screenshot of the page's top (or of the element ``selector``) when asked to."""
    if SHOTS and selector:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        await page.locator(selector).screenshot(path=str(Path(SHOTS) / f"{name}.png"))
    elif SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        height = min(await page.evaluate("document.documentElement.scrollHeight"), SHOT_MAX_HEIGHT)
        await page.screenshot(path=str(Path(SHOTS) / f"{name}.png"), full_page=True,
                              clip={"x": 0, "y": 0, "width": 1280, "height": height})


def api(pipeline) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=pipeline["base"], headers={"X-API-Key": pipeline["admin"]})


pytestmark.append(pytest.mark.asyncio(loop_scope="session"))


async def test_login_keeps_the_key_in_a_secure_http_only_cookie(writer, pipeline):
    cookies = {c["name"]: c for c in await writer.context.cookies()}
    key = cookies["fw_key"]
    assert key["value"] == pipeline["keys"]["write"]
    assert key["httpOnly"] and key["secure"] and key["sameSite"] == "Strict" and key["path"] == "/ui"
    assert pipeline["keys"]["write"] not in writer.url
    assert await writer.evaluate("document.cookie") == ""  # scripts cannot read the key


async def test_overview_lists_every_model_with_its_health(writer, pipeline):
    await writer.goto(pipeline["base"] + "/ui")
    rows = writer.locator("table.fleet tbody tr")
    models = sorted(m["model_id"] for m in pipeline["result"]["models"])
    assert sorted(await rows.locator("th a").all_inner_texts()) == models
    fault_models = set(pipeline["fault"]["models"])
    async with api(pipeline) as http:  # the health column is the worst open alert's severity
        alerting = {a["model_id"] for m in models
                    for a in (await http.get("/v1/alerts", params={"model": m, "limit": 500})).json()
                    if a["state"] != "resolved"}
    assert fault_models <= alerting
    for m in models:
        row = rows.filter(has=writer.get_by_role("link", name=m, exact=True))
        health = await row.locator(".badge").first.inner_text()
        assert ("critical" in health or "warning" in health) == (m in alerting), (m, health)
        assert await row.locator("svg.spark path").count() == 1
    assert await writer.locator("table.heat td.c-breach").count() >= len(fault_models)
    await shot(writer, "fleet")
    await writer.get_by_label("Owner").select_option("ops-analytics")
    await writer.get_by_label("Health").select_option("critical")
    await writer.get_by_role("button", name="Filter").click()
    shown = set(await writer.locator("table.fleet tbody th a").all_inner_texts())
    assert shown and shown <= alerting


async def test_fault_is_an_incident_with_its_alerts_and_notification_log(writer, pipeline):
    fault = pipeline["fault"]
    await writer.goto(pipeline["base"] + "/ui/incidents")
    await writer.get_by_role("link", name=fault["title"]).first.click()
    await writer.wait_for_url(f"**/ui/incidents/{fault['id']}")
    assert await writer.get_by_text("upstream source weather_feed").count() >= 1
    async with api(pipeline) as http:
        incident = (await http.get(f"/v1/incidents/{fault['id']}")).json()
    rows = writer.locator("table.alerts tbody tr")
    assert await rows.count() == len(incident["alerts"])
    for a in incident["alerts"]:
        row = writer.locator(f"#alert-{a['id']}")
        assert await row.count() == 1
        if a["inhibited_by"]:
            assert "inhibited" in await row.inner_text()
    log = writer.locator("table.log tbody tr")
    assert await log.count() >= 1
    assert "delivered" in (await log.first.inner_text())
    # the page link the webhook carried is this page
    [body] = [b for b in pipeline["sink"].bodies if b["incident"]["id"] == fault["id"]][:1]
    assert body["incident"]["url"] == f"{pipeline['base']}/ui/incidents/{fault['id']}"
    await shot(writer, "incident")


async def test_ack_and_silence_through_the_ui_change_what_the_api_returns(writer, pipeline):
    fault = pipeline["fault"]
    async with api(pipeline) as http:
        firing = [
            a
            for a in (await http.get(f"/v1/incidents/{fault['id']}")).json()["alerts"]
            if a["state"] == "firing"
        ]
        target = firing[0]
        await writer.goto(f"{pipeline['base']}/ui/incidents/{fault['id']}")
        await writer.locator(f"#alert-{target['id']}").get_by_role("button", name="Ack").click()
        await writer.wait_for_url("**done=ack*")
        assert "Acknowledged 1 alert" in await writer.get_by_role("status").inner_text()
        got = (await http.get(f"/v1/alerts/{target['id']}")).json()
        assert got["state"] == "acknowledged" and got["acked_by"] == "write-user"
        assert "acknowledged" in await writer.locator(f"#alert-{target['id']}").inner_text()

        before = len((await http.get("/v1/silences")).json())
        form = writer.get_by_role("form", name="Create a silence")
        assert await form.get_by_label("Value").first.input_value() != ""  # pre-filled from the incident
        await form.get_by_role("button", name="Create silence").click()
        await writer.wait_for_url("**done=silence*")
        silences = (await http.get("/v1/silences")).json()
        assert len(silences) == before + 1
        made = silences[0]
        assert made["state"] == "active" and made["created_by"] == "write-user"
        by_name = {m["name"]: m for m in made["matchers"]}
        import re

        for m in fault["models"]:
            assert re.fullmatch(by_name["model"]["value"], m)
        assert not re.fullmatch(by_name["model"]["value"], "arrdelay-aa")


async def test_read_only_key_cannot_ack(browser, pipeline):
    ctx, page = await signed_in(browser, pipeline, "read")
    try:
        fault = pipeline["fault"]
        async with api(pipeline) as http:
            firing = [
                a
                for a in (await http.get(f"/v1/incidents/{fault['id']}")).json()["alerts"]
                if a["state"] == "firing"
            ]
            target = firing[-1]
            await page.goto(f"{pipeline['base']}/ui/incidents/{fault['id']}")
            async with page.expect_response(lambda r: r.request.method == "POST") as answer:
                await page.locator(f"#alert-{target['id']}").get_by_role("button", name="Ack").click()
            assert (await answer.value).status == 403
            assert "scope 'write'" in await page.get_by_role("alert").inner_text()
            assert (await http.get(f"/v1/alerts/{target['id']}")).json()["state"] == "firing"
            # A form without the session's CSRF token is refused even with a write key.
            forged = await page.request.post(
                f"{pipeline['base']}/ui/incidents/{fault['id']}/ack",
                form={"csrf": "0" * 64, "alert": target["id"]},
            )
            assert forged.status == 403
    finally:
        await ctx.close()


async def test_feature_page_draws_the_reference_beside_the_window(writer, pipeline):
    m = pipeline["fault"]["models"][0]
    fault_day = int(datetime(2013, 3, 5, tzinfo=UTC).timestamp())
    await writer.goto(f"{pipeline['base']}/ui/models/{m}/features/wind_speed?window={fault_day}")
    assert await writer.locator("rect.bar-ref").count() > 3
    assert await writer.locator("rect.bar-win").count() > 3
    assert (
        await writer.locator("path.ecdf-ref").count() == 1
        and await writer.locator("path.ecdf-win").count() == 1
    )
    assert await writer.locator("line.floor").count() >= 1  # effect over time against the floor
    await shot(writer, "feature-numeric")
    await shot(writer, "feature-numeric-distribution", "#distribution")
    await writer.goto(f"{pipeline['base']}/ui/models/{m}/features/origin")
    assert await writer.locator("rect.bar-ref").count() >= 3
    assert await writer.get_by_role("rowheader", name="other", exact=True).count() == 1
    await shot(writer, "feature-categorical", "#distribution")


async def test_feature_page_marks_the_faults_breach_and_shades_its_alert_span(writer, pipeline):
    m = pipeline["fault"]["models"][0]
    async with api(pipeline) as http:
        alerts = (await http.get("/v1/alerts", params={"model": m})).json()
    [alert] = [a for a in alerts if a["feature"] == "visib" and a["check"] == "null_rate"]
    await writer.goto(f"{pipeline['base']}/ui/models/{m}/features/visib")
    chart = writer.locator("section", has=writer.locator("#check-null_rate"))
    # the fault's first breach is a triangle linked to its window
    breach = chart.locator(f'a[href="/ui/models/{m}/windows/{alert["window_start"]}"] g.mk-breach path')
    assert await breach.count() == 1
    band = chart.locator("rect.band")
    assert await band.count() == 1
    assert (await band.locator("title").text_content()).startswith("alert null_rate ")
    link = chart.locator("a", has=writer.locator("rect.band"))
    assert await link.get_attribute("href") == f"/ui/incidents/{alert['incident_id']}"
    # the span starts at the alert's first window: at its breach marker's x
    box, mark = await band.bounding_box(), await breach.bounding_box()
    assert box["x"] <= mark["x"] + mark["width"] / 2 <= box["x"] + box["width"]


async def test_model_window_and_gate_pages_link_together(writer, pipeline):
    m = pipeline["fault"]["models"][0]
    await writer.goto(f"{pipeline['base']}/ui/models/{m}")
    assert await writer.get_by_role("heading", name=m, exact=True).count() == 1
    assert await writer.get_by_role("link", name="visib").count() >= 1
    await shot(writer, "model")
    breach_day = int(datetime(2013, 3, 4, tzinfo=UTC).timestamp())
    await writer.goto(f"{pipeline['base']}/ui/models/{m}/windows/{breach_day}")
    row = writer.locator("tr.row-breach").filter(has_text="null_rate")
    assert await row.filter(has_text="visib").count() == 1
    assert "breach" in await row.first.inner_text()
    await shot(writer, "window")
    await writer.get_by_role("link", name="the gate").click()
    await writer.wait_for_url("**/ui/fdr")
    assert await writer.locator("table tbody tr").count() >= 1
    await shot(writer, "fdr")


async def test_unknown_model_is_a_404_page(writer, pipeline):
    answer = await writer.goto(f"{pipeline['base']}/ui/models/no-such-model")
    assert answer.status == 404
    assert await writer.get_by_role("heading", name="Unknown model").count() == 1
    assert "no-such-model" in await writer.get_by_role("alert").inner_text()


# Form controls without a label, an aria-label or (buttons) a text.
UNLABELLED = """() => [...document.querySelectorAll('input, select, button')]
    .filter(e => e.type !== 'hidden')
    .filter(e => !(e.labels && e.labels.length) && !e.getAttribute('aria-label') && !e.textContent.trim())
    .map(e => e.outerHTML)"""


async def test_pages_are_usable_by_keyboard_with_labelled_controls(writer, pipeline):
    fault = pipeline["fault"]
    for path in ("/ui", f"/ui/incidents/{fault['id']}", f"/ui/models/{fault['models'][0]}/features/visib"):
        await writer.goto(pipeline["base"] + path)
        unlabelled = await writer.evaluate(UNLABELLED)
        assert unlabelled == [], (path, unlabelled)
    await writer.goto(pipeline["base"] + "/ui")
    await writer.keyboard.press("Tab")
    assert await writer.evaluate("document.activeElement.textContent") == "Skip to content"
    await writer.keyboard.press("Enter")
    assert await writer.evaluate("document.activeElement.id") == "main"
    # Filter from the keyboard only: type in the search box, Enter submits the form.
    target = pipeline["fault"]["models"][0]
    await writer.get_by_role("searchbox", name="Model").focus()
    await writer.keyboard.type(target)
    await writer.keyboard.press("Enter")
    await writer.wait_for_url("**q=*")
    assert await writer.locator("table.fleet tbody th a").all_inner_texts() == [target]


# Per health badge: its word, whether it carries a shape (an aria-hidden icon) beside it.
BADGES = """() => [...document.querySelectorAll('table.fleet .badge')].map(b => {
    const icon = b.querySelector('[aria-hidden=true]');
    return [b.textContent.replace(/[^a-z ]/g, '').trim(), !!icon && icon.textContent.trim() !== ''];})"""
# Per heatmap cell state: its text and whether it is patterned or outlined (not colour alone).
CELLS = """() => [...document.querySelectorAll('table.heat td.c')].map(c => {
    const s = getComputedStyle(c);
    return [c.className.split(' ').find(k => k.startsWith('c-')) || 'none', c.textContent.trim(),
            s.backgroundImage !== 'none', s.outlineStyle];})"""


async def test_no_state_relies_on_colour_alone_and_focus_is_visible(writer, pipeline):
    await writer.goto(pipeline["base"] + "/ui")
    badges = await writer.evaluate(BADGES)
    assert badges and all(word and shaped for word, shaped in badges), badges
    cells = await writer.evaluate(CELLS)
    breach = [c for c in cells if c[0] == "c-breach"]
    assert breach and all(text.startswith("▲") and patterned and outline == "solid"
                          for _k, text, patterned, outline in breach), breach
    assert all(not text.startswith("▲") and not patterned for k, text, patterned, _o in cells
               if k in ("c-ok", "c-drift")), cells
    inconclusive = [c for c in cells if c[0] == "c-inconclusive"]
    assert all(text.startswith("?") and outline == "dotted" for _k, text, _p, outline in inconclusive)
    # the breach markers of the effect chart are triangles, the others other shapes
    m = pipeline["fault"]["models"][0]
    await writer.goto(f"{pipeline['base']}/ui/models/{m}/features/visib")
    assert await writer.locator("g.mk-breach path").count() >= 1
    assert await writer.locator("g.mk-breach circle").count() == 0
    assert await writer.locator("g.mk-ok path").count() == 0
    # a focused control shows a ring
    await writer.keyboard.press("Tab")
    ring = await writer.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert ring == "solid"
