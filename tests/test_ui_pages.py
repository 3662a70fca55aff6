"""The dashboard's pages and forms over ASGI on a real Redis: login, cookies, CSRF, scopes,
error pages, and the reads behind the pages (gate records, cached window counts). The same
flows in a real browser: tests/test_ui_browser.py."""

from __future__ import annotations

import dataclasses
import re
import secrets
from datetime import timedelta

import httpx
import numpy as np
import pytest
from pydantic import SecretStr

from detectors.fdr.epoch import EpochSpending
from detectors.result import TestResult, judged
from service.alerting.fdr import FdrGate
from service.alerting.store import AlertStore
from service.api.app import create_app
from service.api.auth import ApiKeyStore, Scope
from service.paging.keys import incident_index_key
from service.paging.outbox import Guard, NewItem, Outbox
from service.profiles.checkpoints import ClosedWindow
from service.profiles.keys import window_member
from service.registry import ModelConfig
from service.ui.session import KEY_COOKIE
from sketches.profile import WindowProfile
from tests.test_alerting_policy import BREACH, HEALTHY, apply, policy, result, window

ADMIN = secrets.token_urlsafe(32)


def csrf_of(html: str) -> str:
    return re.search(r'name="csrf" value="([0-9a-f]+)"', html).group(1)


@pytest.fixture
def auth_settings(settings):
    return settings.model_copy(update={"api_auth": True, "api_admin_key": SecretStr(ADMIN)})


def client(app) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="https://fw.test", headers={"host": "fw.test"}
    )


async def login(http: httpx.AsyncClient, key: str) -> httpx.Response:
    form = await http.get("/ui/login")
    return await http.post("/ui/login", data={"key": key, "csrf": csrf_of(form.text), "next": "/ui"})


async def test_pages_need_a_key_and_login_sets_a_strict_http_only_cookie(auth_settings, store):
    async with client(create_app(auth_settings, store)) as http:
        first = await http.get("/ui/models/m1?x=1")
        assert first.status_code == 303
        assert first.headers["location"] == "/ui/login?next=%2Fui%2Fmodels%2Fm1%3Fx%3D1"
        wrong = await login(http, "fwk_nope_nope")
        assert wrong.status_code == 401 and "Unknown or revoked API key" in wrong.text
        ok = await login(http, ADMIN)
        assert ok.status_code == 303 and ok.headers["location"] == "/ui"
        cookie = next(c for c in ok.headers.get_list("set-cookie") if c.startswith(f"{KEY_COOKIE}="))
        flags = {p.strip().lower() for p in cookie.split(";")[1:]}
        assert {"httponly", "secure", "samesite=strict", "path=/ui"} <= flags
        assert ADMIN not in ok.headers["location"]
        page = await http.get("/ui")
        assert page.status_code == 200 and "bootstrap admin key (scope admin)" in page.text


async def test_login_refuses_a_form_without_its_csrf_token_and_open_redirects(auth_settings, store):
    async with client(create_app(auth_settings, store)) as http:
        await http.get("/ui/login")
        forged = await http.post("/ui/login", data={"key": ADMIN, "csrf": "0" * 64})
        assert forged.status_code == 403 and KEY_COOKIE not in forged.cookies
        form = await http.get("/ui/login")
        away = await http.post(
            "/ui/login", data={"key": ADMIN, "csrf": csrf_of(form.text), "next": "//evil.example/ui"}
        )
        assert away.headers["location"] == "/ui"


async def test_csrf_token_is_bound_to_the_session_key_and_the_site(auth_settings, store):
    _key, read = await ApiKeyStore(store.r).create("viewer", Scope.read, 0.0)
    await store.put_model_config("m1", ModelConfig())
    app = create_app(auth_settings, store)
    async with client(app) as http:
        anonymous = csrf_of((await http.get("/ui/login")).text)
        await login(http, ADMIN)
        page = await http.get("/ui/incidents")
        signed = csrf_of(page.text)
        assert signed != anonymous  # the token changes with the key
        # the pre-login token no longer passes
        got = await http.post("/ui/logout", data={"csrf": anonymous})
        assert got.status_code == 403
        # another site's form is refused even with the right token
        got = await http.post("/ui/logout", data={"csrf": signed}, headers={"origin": "https://evil.example"})
        assert got.status_code == 403 and "another site" in got.text
        got = await http.post("/ui/logout", data={"csrf": signed})
        assert got.status_code == 303 and (await http.get("/ui")).status_code == 303
    async with client(app) as http:  # a read key: actions answer 403 as a page
        await login(http, read)
        token = csrf_of((await http.get("/ui")).text)
        got = await http.post("/ui/incidents/nope/ack", data={"csrf": token})
        assert got.status_code == 403 and "scope &#39;write&#39;" in got.text
        got = await http.post("/ui/incidents/nope/silence", data={"csrf": token})
        assert got.status_code == 403


async def test_error_pages_are_html(settings, store):
    async with client(create_app(settings, store)) as http:
        for path, status, text in (
            ("/ui/models/nope", 404, "No model &#39;nope&#39;"),
            ("/ui/incidents/nope", 404, "No incident"),
            ("/ui/no/such/page", 404, "No dashboard page"),
            ("/ui?tier=9", 422, "tier must be"),
            ("/ui?sort=nonsense", 422, "sort must be"),
        ):
            got = await http.get(path)
            assert got.status_code == status, path
            assert got.headers["content-type"].startswith("text/html") and text in got.text, path
        assert (await http.get("/ui/")).headers["location"] == "/ui"
        css = await http.get("/ui/static/fleetwatch.css")
        assert css.status_code == 200 and "Okabe-Ito" in css.text


async def test_gate_record_names_what_the_gate_discovered_per_window(store):
    p = policy(store)
    await apply(p, "m1", 0, {("x", "psi"): BREACH, ("y", "psi"): HEALTHY})
    member = window_member(300, 1_700_006_400 - 1_700_006_400 % 86_400, "1")
    record = await AlertStore(store.r).gate("m1", member)
    tests = {(t["feature"], t["check"]): t for t in record["tests"]}
    assert tests[("x", "psi")] == {"feature": "x", "check": "psi", "discovered": True, "breach": True}
    assert tests[("y", "psi")]["discovered"] is False and tests[("y", "psi")]["breach"] is False
    assert record["granted"] == 2 and 0 < record["level"] < 0.05


async def test_window_counts_are_read_from_profiles_once(store, settings):
    p = WindowProfile("m1", 0, 300)
    p.count = 42
    members = [window_member(300, 0, "1"), window_member(300, 300, "1")]
    q = WindowProfile("m1", 300, 300)
    q.count = 7
    epoch = (await store.acquire_partition("t", 0)).epoch
    assert await store.checkpoint(
        "t",
        0,
        epoch,
        {},
        [],
        [ClosedWindow("m1", members[0], 0, p.to_bytes()), ClosedWindow("m1", members[1], 300, q.to_bytes())],
        3600,
    )
    assert await store.window_counts("m1", members) == [42, 7]
    await store.r.delete(f"fw:{{m1}}:p:{members[0]}")  # cached: no need of the profile again
    assert await store.window_counts("m1", members) == [42, 7]
    assert await store.window_counts("m1", [window_member(300, 600, "1")]) == [None]


def items(incident_id: str, n: int, t0: float, receivers: int = 1) -> list[NewItem]:
    """``n`` notifications of one incident, to ``receivers`` receivers in turn (each
    receiver's are sent in order, one at a time)."""
    return [NewItem(f"{incident_id[:6]}-{i:05d}", f"r{i % receivers}", "webhook", incident_id, "trigger",
                    f'{{"n": {i}}}', t0 + i, t0 + i) for i in range(n)]


async def test_incident_log_lists_all_its_notifications_whatever_the_outbox_holds(settings, store):
    """The log looked through the outbox's 2,000 newest notifications only: an incident's
    earlier ones disappeared from its page once the fleet had paged more since."""
    p = policy(store)
    for w in range(2):
        await apply(p, "m1", w, {("x", "psi"): BREACH})
    [incident] = await AlertStore(store.r).incidents(0, 10)
    outbox = Outbox(store.r, retention=timedelta(seconds=600))
    guard = Guard("{fw}:test:guard", "", {}, "{fw}:test:due", "g", None)
    assert await outbox.commit(guard, items(incident.id, 3, 1_000.0, receivers=3))
    assert await outbox.commit(dataclasses.replace(guard, version="1"), items("other", 2_100, 2_000.0))
    # the first is delivered on its second attempt, the second dead-lettered; the third
    # (claimed: a send in flight) pends
    claimed = {i.id: i for i in await outbox.claim(1e6, 60, 10, "tok") if i.incident_id == incident.id}
    first, second, third = (claimed[f"{incident.id[:6]}-{k:05d}"] for k in (0, 1, 2))
    assert await outbox.finish(first, "tok", "delivered", 1_001.0, 2)
    assert await outbox.finish(second, "tok", "dead", 1_002.0, 5, "HTTP 500")
    assert await store.r.ttl(incident_index_key(incident.id)) == -1  # one still pending
    async with client(create_app(settings, store)) as http:
        page = await http.get(f"/ui/incidents/{incident.id}")
    log = page.text.split("<h2>Notification log</h2>", 1)[1]
    rows = re.findall(r'<tr class="n-(\w+)">', log)
    assert rows == ["delivered", "dead", "pending"], log[:1500]
    assert "2 (1 retry)" in log and "HTTP 500" in log
    assert await outbox.finish(third, "tok", "delivered", 1_003.0, 1)
    assert 0 < await store.r.ttl(incident_index_key(incident.id)) <= 600  # expires with the items
    await store.r.delete(f"{{fw}}:outbox:item:{first.id}")  # expired
    assert [i.id for i in await outbox.for_incident(incident.id)] == [second.id, third.id]
    assert await store.r.zcard(incident_index_key(incident.id)) == 2


async def test_fdr_page_shows_tests_submitted_granted_discovered_and_capacity(settings, store):
    """The gate view lacked the tests submitted: a slot past its capacity looked like a
    full one, its unfunded tests (level 0) invisible."""
    params = EpochSpending(alpha=0.05, slot_seconds=300, min_tests_per_slot=4, max_tests_per_slot=4)
    gate = FdrGate(store.r, params)
    t0 = 1_700_006_400 - 1_700_006_400 % 86_400
    first = await gate.gate("m1\0w1", t0, 300, [1e-12, 0.9, 0.8])
    second = await gate.gate("m2\0w1", t0, 300, [1e-12, 0.5, 0.4])  # 1 granted of 3: capacity 4
    assert (first.granted, second.granted) == (3, 1)
    settings = settings.model_copy(update={"fdr_max_tests_per_window": 4, "fdr_min_tests_per_window": 4})
    async with client(create_app(settings, store)) as http:
        page = await http.get("/ui/fdr")
    assert page.status_code == 200
    head = re.findall(r'<th scope="col">([^<]+)</th>', page.text)
    assert {"Tests submitted", "Tests granted", "Capacity used", "Discoveries", "Level, 1 test"} <= set(head)
    [row] = re.findall(r"<tbody>\s*<tr>(.*?)</tr>", page.text, re.S)
    cells = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td>(.*?)</td>", row, re.S)]
    by = dict(zip(head, cells, strict=True))
    assert by["Tests submitted"] == "6"
    assert by["Tests granted"].startswith("4") and "2 unfunded" in by["Tests granted"]
    assert by["Capacity used"].endswith("100.0% of 4") and by["Discoveries"].startswith("2")


async def evaluated(store, p, w: int, results: list[TestResult], cfg: ModelConfig) -> None:
    """Window ``w`` of model m1 closed (a profile of 100 records), its ``results`` stored and
    the alert policy applied to them, as the detector does."""
    ref = window("m1", w)
    prof = WindowProfile("m1", ref.start, ref.length)
    prof.count = 100
    epoch = (await store.acquire_partition("t", 0)).epoch
    assert await store.checkpoint("t", 0, epoch, {}, [], [ClosedWindow("m1", ref.member, ref.start,
                                                                       prof.to_bytes())], 3600)
    await store.put_results("m1", ref.member, [{**dataclasses.asdict(r), "baseline": "reference"}
                                               for r in results], 3600, prof.count)
    alerting: dict[str, frozenset[str]] = {}
    for r in results:
        alerting[r.feature] = alerting.get(r.feature, frozenset()) | {r.check}
    await p.apply(ref, results, alerting, cfg, [], 1e9, None)


def hrefs(html: str, prefix: str) -> list[str]:
    return [h.replace("&amp;", "&") for h in re.findall(r'href="(' + re.escape(prefix) + r'[^"]*)"', html)]


async def test_links_lead_from_the_overview_to_incident_model_feature_and_window_and_resolve_acts(
    settings, store
):
    """alert -> incident -> model -> feature -> window by the pages' own links; resolving
    through the incident page changes what the API and the overview answer."""
    await store.put_model_config("m1", ModelConfig(tier=1))
    p = policy(store)
    for w in range(2):
        await evaluated(store, p, w, [result("x", "psi", *BREACH)], ModelConfig(tier=1))
    async with client(create_app(settings, store)) as http:
        overview = (await http.get("/ui")).text
        assert "critical" in overview
        [incident] = hrefs(overview, "/ui/incidents/")
        page = (await http.get(incident)).text
        assert "/ui/models/m1" in hrefs(page, "/ui/models/m1")
        [feature] = [h for h in hrefs(page, "/ui/models/m1/features/x") if "window=" in h]
        model = (await http.get("/ui/models/m1")).text
        assert incident in hrefs(model, "/ui/incidents/")
        assert "/ui/models/m1/features/x" in hrefs(model, "/ui/models/m1/features/")
        feat = await http.get(feature)
        assert feat.status_code == 200
        windows = hrefs(feat.text, "/ui/models/m1/windows/")
        assert windows and incident in hrefs(feat.text, "/ui/incidents/")
        why = await http.get(windows[-1])
        assert why.status_code == 200 and "psi" in why.text
        head = re.findall(r'<th scope="col">([^<]+)</th>', why.text)
        assert {"Statistic", "Effect", "Floor", "p-value", "FDR level", "Decision", "Sketch error bound",
                "Persistence"} <= set(head)
        assert re.search(r'<tr class="[^"]*row-breach', why.text)
        assert incident in hrefs(why.text, "/ui/incidents/")
        # resolve every open alert of the incident through its form
        token = csrf_of(page)
        done = await http.post(f"{incident}/resolve", data={"csrf": token, "by": "alice"})
        assert done.status_code == 303 and "done=resolve%3A1" in done.headers["location"]
        [alert] = (await http.get("/v1/alerts")).json()
        assert alert["state"] == "resolved" and alert["resolved_by"] == "alice"
        after = await http.get("/ui", params={"health": "ok"})
        assert re.search(r'<th scope="row"><a href="/ui/models/m1">m1</a>', after.text)


# A marker of the effect chart: the window it links to, its kind, its x (px), a circle's radius.
MARKER = re.compile(r'<a href="/ui/models/m1/windows/(\d+)">\s*<g class="mk mk-(\w+)"><title>[^<]*</title>\s*'
                    r'<(?:path d="M|circle cx=")([\d.]+)(?:" cy="[\d.]+" r="([\d.]+))?')
BAND = re.compile(r'<a href="([^"]+)"><rect class="band" x="([\d.]+)" y="[\d.]+" width="([\d.]+)"[^>]*>'
                  r"<title>([^<]+)</title>")


async def test_feature_page_marks_breaches_inconclusive_windows_and_the_alert_span(settings, store):
    """The effect chart of a feature: a marker per window of its kind (breach: a triangle,
    inconclusive: a hollow circle, ok: a dot) and the alert's span shaded from its first
    window to the end of its last breach, linked to its incident."""
    cfg = ModelConfig(tier=1)
    await store.put_model_config("m1", cfg)
    p = policy(store)
    # only the exact p-value is significant: the sketches' error leaves it undecided
    inconclusive = judged("psi", "x", 1.0, 1.0, 0.5, 1000, 1000, p_exact=1e-8, floor=0.2)
    assert inconclusive.status == "inconclusive"
    plan = [HEALTHY, inconclusive, BREACH, BREACH, BREACH, HEALTHY]
    for w, outcome in enumerate(plan):
        await evaluated(store, p, w, [outcome if isinstance(outcome, TestResult)
                                      else result("x", "psi", *outcome)], cfg)
    [alert] = (await AlertStore(store.r).alerts("m1", 0, 10))
    starts = [window("m1", w).start for w in range(len(plan))]
    # the alert starts at its first breach (k of m) and its span ends with its last one
    span = (alert.window_start, alert.last_window_start, alert.state)
    assert span == (starts[2], starts[4], "firing")
    async with client(create_app(settings, store)) as http:
        page = await http.get("/ui/models/m1/features/x")
    assert page.status_code == 200
    chart = page.text.split('<h3 id="check-psi">', 1)[1].split("</figure>", 1)[0]
    found = MARKER.findall(chart)
    markers = {int(s): (kind, float(x)) for s, kind, x, _r in found}
    assert {s: kind for s, (kind, _x) in markers.items()} == dict(zip(starts, [
        "ok", "inconclusive", "breach", "breach", "breach", "ok"], strict=True))
    # shapes, not colour alone: breaches are triangles (paths), inconclusive windows large
    # (hollow) circles, the others dots
    assert [r or "path" for _s, _k, _x, r in found] == ["2.5", "4.5", "path", "path", "path", "2.5"]
    [(href, x0, width, title)] = BAND.findall(chart)
    assert href == f"/ui/incidents/{alert.incident_id}"
    assert title == f"alert psi firing ({alert.severity})"
    # from the alert's first window to the end of its last breach: the next window's start
    assert float(x0) == pytest.approx(markers[alert.window_start][1])
    assert float(x0) + float(width) == pytest.approx(markers[starts[5]][1])


def test_performance_chart_draws_realized_beside_the_label_free_estimate_and_maturity():
    from service.ui.views.model import _performance_chart

    cohorts = [{"window_start": 3600 * i, "realized": {"roc_auc": r}, "estimated": {"roc_auc": e},
                "maturity": {"mature": mature, "labeled_fraction": f}}
               for i, (r, e, mature, f) in enumerate([(0.9, 0.88, True, 0.95), (0.7, 0.86, True, 0.9),
                                                      (None, 0.84, False, 0.1)])]
    chart = _performance_chart({"task": "binary", "cohorts": cohorts}, 3600, "m1")
    assert [m.kind for m in chart.markers] == ["ok", "ok"]  # the immature cohort has no realized value
    assert chart.alt_d.count("L") == 2 and chart.alt_label == "label-free estimate of roc_auc"
    assert chart.y_label == "roc_auc" and "labeled 90% (mature)" in chart.markers[1].title
    cohorts[1]["realized"] = {"roc_auc": 0.8}
    cohorts[1]["maturity"]["mature"] = False
    chart = _performance_chart({"task": "binary", "cohorts": cohorts}, 3600, "m1")
    assert [m.kind for m in chart.markers] == ["ok", "immature"]  # drawn hollow: never judged
    assert "immature: not judged" in chart.markers[1].title
    regression = _performance_chart({"task": "regression", "cohorts": [
        {**c, "realized": {"mae": 1.0}, "estimated": {}} for c in cohorts]}, 3600, "m1")
    assert regression.alt_d == ""  # no label-free estimate for regression


def test_categorical_distribution_shows_the_references_top_categories_new_ones_and_other():
    from service.ui.views.distribution import TOP_CATEGORIES, _categorical
    from sketches.feature import FeatureProfile

    ref, win = FeatureProfile(), FeatureProfile()
    ref.categorical.update_counts({f"c{i}": 100 - i for i in range(TOP_CATEGORIES + 5)})
    win.categorical.update_counts({"c0": 50, "c1": 30, "brand-new": 40})
    got = _categorical(ref, win)
    names = [row[0] for row in got.table]
    assert names[:TOP_CATEGORIES] == [f"c{i}" for i in range(TOP_CATEGORIES)]
    assert names[TOP_CATEGORIES:] == ["brand-new", "other"]
    new = got.table[TOP_CATEGORIES]
    assert new[1] == 0.0 and new[2] == pytest.approx(40 / 120) and new[3].startswith("new")
    other = got.table[-1]  # the reference's categories past its top ones
    assert other[1] == pytest.approx(sum(100 - i for i in range(TOP_CATEGORIES, TOP_CATEGORIES + 5))
                                     / sum(100 - i for i in range(TOP_CATEGORIES + 5)))
    assert other[2] == pytest.approx(0.0, abs=1e-9)
    assert got.bars is not None and len(got.bars.ref_bars) == len(got.bars.win_bars) == TOP_CATEGORIES + 2


def test_multivariate_page_lists_the_pairs_whose_correlation_moved_most():
    from service.ui.views.distribution import _correlations
    from sketches.comoments import CoMoments

    rng = np.random.default_rng(9)
    cov = np.array([[1.0, 0.8, 0.0], [0.8, 1.0, 0.0], [0.0, 0.0, 1.0]])

    def block(x):
        c = CoMoments()
        c.update({"a": x[:, 0], "b": x[:, 1], "c": x[:, 2]}, {}, len(x))
        return c

    ref = block(rng.multivariate_normal(np.zeros(3), cov, 4_000))
    got = _correlations(ref, block(rng.normal(size=(1_000, 3))))
    assert got.kind == "correlation" and len(got.table) == 3
    name, r, w, note = got.table[0]
    assert name == "a × b" and r == pytest.approx(0.8, abs=0.03) and abs(w) < 0.1
    assert note.startswith("change of Fisher z -1.")
    assert _correlations(ref, None).kind == "none"
