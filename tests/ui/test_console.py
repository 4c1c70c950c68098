"""The web console in a real browser (Debian's chromium through Playwright) against a real `semreg serve`
with tokens: a person signs in, sees the registered instances, drains one and watches its status change
without a reload, registers one through the form, uploads a broken ontology and reads the error at its
line, browses from a class to an instance, runs a discovery and reads why each tag matched, and runs a
SPARQL query and reads the table. Every view is checked by axe-core in the light and the dark theme, and
no page reports an error it was not asked to (see `browser.Watched`)."""
from __future__ import annotations

import json
import re
import socket
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from playwright.sync_api import expect, sync_playwright
from support.browser import BROWSER_THREAD_PREFIX, Watched, check_accessibility, launch, snapshot
from support.paths import ONTOLOGIES
from support.server import ServerProcess

pytestmark = pytest.mark.process

ADMIN = "console-admin-token"
WRITER = "console-team-token"
STAGER = "console-stage-token"  # read, bound to the environment `staging`
TAGS = {"gw": ["ex:Obra a owl:Thing"], "livros": ["ex:Obra a ex:Livro", "ex:Romance ex:temUmGenero ex:Terror"],
        "filmes": ["ex:Filme ex:temUmGenero ex:Terror"], "pinturas": ["ex:Obra a ex:Pintura"]}
BROKEN = b"""@prefix ex: <http://example.org/broken#> .
ex:A a <http://www.w3.org/2002/07/owl#Class> .
ex:B ex:p ex:C ex:D .
ex:E a ex:A .
"""


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    """A server with an admin and a write token, the case study's ontology and four instances."""
    base = tmp_path_factory.mktemp("console")
    tokens = base / "tokens.json"
    tokens.write_text(json.dumps({"tokens": [{"name": "ops", "token": ADMIN, "scopes": ["admin"]},
                                             {"name": "team", "token": WRITER, "scopes": ["read", "write"]},
                                             {"name": "stage", "token": STAGER, "scopes": ["read"],
                                              "environments": ["staging"]}]}))
    server = ServerProcess(None, "--tokens", str(tokens), "--ontology", str(ONTOLOGIES / "obras.ttl"))
    server.start(base / "logs")
    try:
        with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {ADMIN}"}) as api:
            for n, (iid, tags) in enumerate(TAGS.items()):
                body = {"service": iid, "address": "127.0.0.1", "port": 9000 + n, "ttl": 0, "tags": tags}
                assert api.put(f"/v1/instances/{iid}", json=body).status_code == 201
            yield server, api
    finally:
        server.stop()


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    manager = sync_playwright()
    playwright = manager.__enter__()
    # Playwright writes screenshots and downloads through its loop's executor: threads of this module's
    # browser, named so that the leak check knows them (they end with it).
    manager._loop.set_default_executor(ThreadPoolExecutor(2, thread_name_prefix=BROWSER_THREAD_PREFIX))
    try:
        context = launch(playwright, tmp_path_factory.mktemp("profiles"))
        try:
            yield context
        finally:
            context.close()
    finally:
        manager.__exit__(None, None, None)


@pytest.fixture
def page(browser):
    page = browser.new_page()
    watched = Watched(page)
    try:
        yield watched
    finally:
        page.close()
    watched.assert_clean()


def sign_in(watched: Watched, url: str, token: str = ADMIN, name: str = "ops") -> None:
    page = watched.page
    page.goto(url + "/")
    expect(page).to_have_url(url + "/ui/")
    field = page.get_by_label("Token")
    expect(field).to_be_focused()
    field.fill(token)
    field.press("Enter")
    expect(page.get_by_text(f"Signed in as {name}")).to_be_visible()


def test_sign_in_then_the_live_overview(registry, page):
    server, api = registry
    p = page.page
    p.goto(server.url + "/")
    expect(p.get_by_role("heading", name="Sign in to semreg")).to_be_visible()
    check_accessibility(p, "sign-in")
    sign_in(page, server.url)
    expect(p.get_by_role("heading", name="Overview")).to_be_visible()
    expect(p.get_by_test_id("instance-total")).to_have_text(str(len(TAGS)))
    expect(p.get_by_test_id("concepts")).not_to_have_text("…")
    expect(p.get_by_test_id("checksum")).to_have_text(re.compile(r"^\d+$"))
    expect(p.get_by_role("link", name="livros")).to_be_visible()
    p.evaluate("() => { window.stillTheSamePage = true; }")
    body = {"service": "extra", "address": "127.0.0.1", "port": 9100, "ttl": 0, "tags": ["ex:Drama"]}
    assert api.put("/v1/instances/extra", json=body).status_code == 201
    expect(p.get_by_test_id("instance-total")).to_have_text(str(len(TAGS) + 1))
    expect(p.get_by_role("link", name="extra registered (extra)")).to_be_visible()
    assert api.delete("/v1/instances/extra").status_code == 204
    expect(p.get_by_role("link", name="extra registered (extra)")).to_be_visible()
    expect(p.get_by_text("extra deregistered")).to_be_visible()
    expect(p.get_by_test_id("instance-total")).to_have_text(str(len(TAGS)))
    assert p.evaluate("() => window.stillTheSamePage") is True
    check_accessibility(p, "overview")
    assert p.evaluate("() => sessionStorage.getItem('semreg.token')") == ADMIN
    assert p.evaluate("() => localStorage.length") == 0


def test_registered_instances_are_listed_and_searchable(registry, page):
    server, _ = registry
    p = page.page
    sign_in(page, server.url)
    p.get_by_role("link", name="Instances", exact=True).click()
    rows = p.locator("tbody tr")
    expect(rows).to_have_count(len(TAGS))
    expect(p.locator("tr[data-id=livros]")).to_contain_text("http://127.0.0.1:9001")
    check_accessibility(p, "instances")
    p.get_by_label("Tag").fill("ex:Terror")
    p.get_by_role("button", name="Search").click()
    expect(p.get_by_test_id("summary")).to_have_text(re.compile(r"^2 instances"))
    expect(rows).to_have_count(2)
    expect(p.locator("tr[data-id=filmes]")).to_be_visible()
    p.get_by_label("Tag").fill("ex:Obra a ex:Pintura")
    p.get_by_role("button", name="Search").click()
    expect(rows).to_have_count(1)
    expect(p.locator("tr[data-id=pinturas]")).to_be_visible()


def test_drain_an_instance_and_watch_its_status_change_without_a_reload(registry, page):
    server, api = registry
    p = page.page
    sign_in(page, server.url)
    p.goto(server.url + "/ui/#/instances/pinturas")
    expect(p.get_by_test_id("status")).to_have_text("up")
    expect(p.get_by_test_id("tags")).to_contain_text("ex:Obra rdf:type ex:Pintura")
    check_accessibility(p, "instance")
    p.evaluate("() => { window.stillTheSamePage = true; }")
    block = p.get_by_role("button", name="Block")
    block.focus()
    p.keyboard.press("Enter")  # by the keyboard: the dialog opens, Escape cancels it
    expect(p.get_by_role("dialog", name="Block pinturas?")).to_be_visible()
    p.keyboard.press("Escape")
    expect(p.get_by_role("dialog")).to_have_count(0)
    assert api.get("/v1/instances/pinturas").json()["status"] == "up"
    p.get_by_role("button", name="Drain").click()
    dialog = p.get_by_role("dialog", name="Drain pinturas?")
    expect(dialog).to_be_visible()
    dialog.get_by_role("button", name="Drain").click()
    expect(p.get_by_test_id("status")).to_have_text("draining")
    assert api.get("/v1/instances/pinturas").json()["status"] == "draining"
    api.put("/v1/instances/pinturas/heartbeat", json={"status": "up"}).raise_for_status()  # from elsewhere
    expect(p.get_by_test_id("status")).to_have_text("up")
    assert p.evaluate("() => window.stillTheSamePage") is True


def test_a_write_token_is_offered_actions_only_on_its_own_instances(registry, page):
    server, _ = registry
    p = page.page
    sign_in(page, server.url, WRITER, "team")
    p.goto(server.url + "/ui/#/instances/livros")
    expect(p.get_by_text("Registered by ops: only that token or an admin may change it.")).to_be_visible()
    expect(p.get_by_role("button", name="Drain")).to_have_count(0)
    expect(p.get_by_role("navigation", name="Views").get_by_role("link", name="Ontologies")).to_be_visible()
    p.goto(server.url + "/ui/#/ontologies")
    expect(p.get_by_role("heading", name="Classes and properties")).to_be_visible()
    expect(p.get_by_label("Ontology file")).to_have_count(0)


def test_register_an_instance_through_the_form(registry, page):
    server, api = registry
    p = page.page
    sign_in(page, server.url)
    p.goto(server.url + "/ui/#/instances")
    p.get_by_role("link", name="Register an instance").click()
    expect(p.get_by_role("heading", name="Register an instance")).to_be_visible()
    p.get_by_label("Id").fill("romances")
    p.get_by_label("Service", exact=True).fill("romances")
    p.get_by_label("Port").fill("9200")
    p.get_by_label("ttl (s, 0 = never expires)").fill("0")
    tags = p.get_by_role("textbox", name="Tags")
    page.expect_refusal(400)
    tags.fill("ex:Romance ex:temUmGenero ex:Terror\nnope:Thing")
    expect(p.get_by_test_id("tag-error")).to_contain_text("line 2 (nope:Thing)")
    expect(p.get_by_test_id("tag-error")).to_contain_text("nope")
    expect(tags).to_have_attribute("aria-invalid", "true")
    check_accessibility(p, "register")
    tags.fill("ex:Romance ex:temUmGenero ex:Terror")
    expect(p.locator("#tags-check")).to_contain_text("1 tag valid")
    expect(p.locator("#tags-check")).to_contain_text("http://example.org/obras#Romance")
    p.get_by_role("button", name="Register").click()
    expect(p.get_by_role("heading", name="Instance romances")).to_be_visible()
    expect(p.get_by_test_id("tags")).to_contain_text("ex:Romance ex:temUmGenero ex:Terror")
    view = api.get("/v1/instances/romances").json()
    assert (view["port"], view["ttl"], view["owner"]) == (9200, 0, "ops")
    p.get_by_role("link", name="Edit").click()
    expect(p.get_by_role("heading", name="Edit romances")).to_be_visible()
    expect(p.get_by_role("textbox", name="Tags")).to_have_value("ex:Romance ex:temUmGenero ex:Terror")
    p.get_by_label("Weight").fill("5")
    p.get_by_role("button", name="Save").click()
    expect(p.get_by_role("heading", name="Instance romances")).to_be_visible()
    expect(p.locator("dd", has_text=re.compile(r"^5$"))).to_have_count(1)
    assert api.get("/v1/instances/romances").json()["weight"] == 5
    assert api.delete("/v1/instances/romances").status_code == 204
    expect(p.get_by_text("This instance is not registered (any more).")).to_be_visible()


def test_upload_a_broken_ontology_and_read_the_error_at_its_line(registry, page):
    server, api = registry
    p = page.page
    sign_in(page, server.url)
    p.get_by_role("link", name="Ontologies").click()
    expect(p.locator("tr[data-name=obras]")).to_be_visible()
    page.expect_refusal(400)
    transfer = p.evaluate_handle("""(text) => { const t = new DataTransfer();
        t.items.add(new File([text], 'broken.ttl', {type: 'text/turtle'})); return t; }""", BROKEN.decode())
    p.get_by_test_id("drop-zone").dispatch_event("drop", {"dataTransfer": transfer})
    expect(p.get_by_role("alert")).to_contain_text("does not parse")
    expect(p.get_by_test_id("upload-excerpt")).to_contain_text("broken.ttl, line 3")
    expect(p.get_by_test_id("error-line")).to_contain_text("ex:B ex:p ex:C ex:D .")
    check_accessibility(p, "ontologies-error")
    assert [o["name"] for o in api.get("/v1/ontologies").json()] == ["obras"]  # a failed upload changes nothing
    p.get_by_label("Ontology file").set_input_files(str(ONTOLOGIES / "transport.ttl"))
    expect(p.get_by_role("status")).to_contain_text("transport:")
    expect(p.locator("tr[data-name=transport]")).to_be_visible()  # the list follows its watch
    p.get_by_role("button", name="Delete transport").click()
    p.get_by_role("dialog").get_by_role("button", name="Delete").click()
    expect(p.locator("tr[data-name=transport]")).to_have_count(0)


def test_browse_a_class_and_reach_an_instance_from_it(registry, page):
    server, _ = registry
    p = page.page
    sign_in(page, server.url)
    p.goto(server.url + "/ui/#/ontologies")
    tree = p.get_by_role("list", name="Class tree")
    tree.get_by_role("link", name="ex:Livro · Book").click()
    expect(p.get_by_role("heading", name="ex:Livro · Book")).to_be_visible()
    expect(p.get_by_test_id("parents")).to_have_text("ex:Obra")
    expect(p.get_by_test_id("children")).to_have_text("ex:Romance")
    expect(p.get_by_test_id("descendants")).to_have_text("ex:Romance")
    check_accessibility(p, "concept")
    p.get_by_test_id("children").get_by_role("link", name="ex:Romance").click()
    expect(p.get_by_role("heading", name="ex:Romance · Novel")).to_be_visible()
    p.get_by_role("row", name=re.compile("livros")).get_by_role("link", name="livros").click()
    expect(p.get_by_role("heading", name="Instance livros")).to_be_visible()
    p.goto(server.url + "/ui/#/ontologies")
    p.get_by_label("Search concepts").fill("genre")
    expect(p.get_by_role("link", name="ex:temUmGenero")).to_be_visible()
    expect(p.get_by_role("list", name="Class tree")).to_be_hidden()


def test_run_a_discovery_and_read_why_each_tag_matched(registry, page):
    server, _ = registry
    p = page.page
    sign_in(page, server.url)
    p.get_by_role("link", name="Discovery").click()
    p.get_by_label("Subject").fill("ex:Obra")
    p.get_by_label("Predicate").fill("ex:temUmGenero")
    p.get_by_label("Object").fill("ex:Terror")
    p.get_by_label("Object").press("Enter")
    group = p.locator("[data-degree=narrower]")
    expect(group.get_by_test_id("match")).to_have_count(2)
    romance = group.get_by_test_id("match").filter(has_text="ex:Romance ex:temUmGenero ex:Terror")
    expect(romance).to_contain_text("distance 2")
    expect(romance.get_by_test_id("why")).to_contain_text(
        "subject: ex:Romance subclass of ex:Livro subclass of ex:Obra (narrower, 2 steps)")
    expect(romance.get_by_test_id("why")).to_contain_text("predicate: the same term")
    filme = group.get_by_test_id("match").filter(has_text="ex:Filme")
    expect(filme.get_by_test_id("why")).to_contain_text("ex:Filme subclass of ex:Obra (narrower, 1 step)")
    expect(p.get_by_test_id("pick")).to_contain_text(re.compile(r"(filmes|livros) at http://127\.0\.0\.1:900\d"))
    check_accessibility(p, "discovery")
    p.get_by_label("Subject").fill("ex:Romance")
    p.get_by_label("Predicate").fill("")
    p.get_by_label("Object").fill("")
    p.get_by_label("Match").select_option("all")
    p.get_by_role("button", name="Discover").click()
    overlap = p.locator("[data-degree=overlap]").get_by_test_id("match").filter(has_text="ex:Obra rdf:type ex:Livro")
    expect(overlap.get_by_test_id("why")).to_contain_text(
        "subject: ex:Romance subclass of ex:Livro subclass of ex:Obra (broader, 2 steps)")
    expect(overlap.get_by_test_id("why")).to_contain_text("predicate: any was asked")
    # near misses, when asked: the similarity, and the words and the ancestor that make the tag close
    p.get_by_label("Subject").fill("ex:Livro")
    p.get_by_label("Predicate").fill("ex:temUmGenero")
    p.get_by_label("Object").fill("ex:Terror")
    p.get_by_label("Match").select_option("all,similar")
    p.get_by_role("button", name="Discover").click()
    near = p.locator("[data-degree=similar]").get_by_test_id("match").filter(has_text="ex:Filme ex:temUmGenero")
    expect(near).to_contain_text(re.compile(r"similarity 0\.\d+"))
    expect(near.get_by_test_id("why")).to_contain_text(
        "subject: close in meaning: shares the words obra, both below ex:Obra")
    expect(near.get_by_test_id("why")).to_contain_text("predicate: the same term")
    check_accessibility(p, "discovery with near misses")


def test_run_a_sparql_query_and_read_the_table(registry, page):
    server, _ = registry
    p = page.page
    sign_in(page, server.url)
    p.get_by_role("link", name="SPARQL").click()
    editor = p.get_by_role("textbox", name="SPARQL query")
    expect(editor).to_be_visible()
    expect(p.locator(".tok-keyword").first).to_have_text("PREFIX")  # highlighted
    p.get_by_role("button", name="tags-of-instances").click()
    expect(editor).to_contain_text("SELECT ?id ?s ?p ?o")
    p.get_by_role("button", name="Run query").click()
    table = p.get_by_test_id("results")
    expect(table.locator("th")).to_have_text(["?id", "?s", "?p", "?o"])
    expect(table.get_by_role("row", name=re.compile(r"livros ex:Romance ex:temUmGenero ex:Terror"))).to_have_count(1)
    check_accessibility(p, "sparql")
    with p.expect_download() as download:
        p.get_by_role("button", name="Download CSV").click()
    assert download.value.suggested_filename == "results.csv"
    assert open(download.value.path(), encoding="utf-8").read().startswith("id,s,p,o")
    editor.click()
    p.keyboard.press("Control+End")
    p.keyboard.press("Enter")
    p.keyboard.type("PREFIX ob")
    p.keyboard.press("Control+Space")
    expect(p.get_by_role("option", name=re.compile("obras"))).to_have_count(0)
    p.keyboard.press("Escape")
    p.keyboard.press("Control+a")
    p.keyboard.type("SELECT ?c WHERE { ?c rdfs:subClassOf ex:Obra } ORDER BY ?c")
    p.keyboard.press("Control+Enter")
    expect(table.get_by_role("cell", name="ex:Romance")).to_be_visible()
    page.expect_refusal(400)
    p.keyboard.press("Control+a")
    p.keyboard.type("SELECT WHERE {")
    p.get_by_role("button", name="Run query").click()
    expect(p.get_by_role("alert")).not_to_be_empty()


@pytest.fixture
def staging(registry):
    """Two instances in `staging` for one test (the others count the four of `default`)."""
    _, api = registry
    for n, iid in enumerate(("trens", "metro")):
        body = {"service": iid, "address": "127.0.0.1", "port": 9300 + n, "ttl": 0, "tags": ["ex:Obra"],
                "environment": "staging"}
        assert api.put(f"/v1/instances/{iid}", json=body).status_code == 201
    try:
        yield api
    finally:
        for iid in ("trens", "metro"):
            api.delete(f"/v1/instances/{iid}")


def test_the_environment_filter(registry, staging, page):
    server, _ = registry
    p = page.page
    sign_in(page, server.url)
    expect(p.get_by_test_id("instance-total")).to_have_text(str(len(TAGS) + 2))
    p.get_by_test_id("environments").get_by_role("link", name="staging").click()
    expect(p.get_by_role("heading", name="Instances")).to_be_visible()
    expect(p.get_by_label("Environment")).to_have_value("staging")
    expect(p.locator("tbody tr")).to_have_count(2)
    expect(p.get_by_test_id("summary")).to_have_text("2 instances; 1–2 shown.")
    p.get_by_label("Environment").select_option("default")
    p.get_by_role("button", name="Search").click()
    expect(p.locator("tbody tr")).to_have_count(len(TAGS))
    assert "environment=default" in p.url
    p.get_by_label("Environment").select_option("")
    p.get_by_label("Tag", exact=True).fill("ex:Obra")
    p.get_by_role("button", name="Search").click()
    expect(p.get_by_test_id("summary")).to_have_text(re.compile(r"^5 instances"))  # gw, livros, pinturas, trens, metro
    check_accessibility(p, "instances-environments")


def test_a_token_bound_to_an_environment_uses_the_console(registry, staging, page):
    server, _ = registry
    p = page.page
    sign_in(page, server.url, STAGER, "stage")
    expect(p.get_by_test_id("instance-total")).to_have_text("2")
    expect(p.get_by_test_id("concepts")).not_to_have_text("…")
    expect(p.get_by_role("link", name="livros")).to_have_count(0)
    p.get_by_role("link", name="Instances", exact=True).click()
    expect(p.locator("tbody tr")).to_have_count(2)
    expect(p.get_by_label("Environment").locator("option")).to_have_text(["staging"])
    p.evaluate("() => { window.stillTheSamePage = true; }")
    staging.put("/v1/instances/trens/heartbeat", json={"status": "draining"}).raise_for_status()
    expect(p.locator("tr[data-id=trens] .badge")).to_have_text("draining")
    staging.put("/v1/instances/livros/heartbeat", json={"status": "blocked"}).raise_for_status()  # not its own
    staging.put("/v1/instances/onibus", json={"service": "onibus", "address": "127.0.0.1", "port": 9310, "ttl": 0,
                                              "environment": "staging"}).raise_for_status()
    try:
        expect(p.get_by_test_id("summary")).to_have_text("3 instances; 1–3 shown.")
        p.get_by_role("link", name="Overview").click()
        expect(p.get_by_test_id("instance-total")).to_have_text("3")
        expect(p.locator("[data-status=blocked] dd")).to_have_text("0")
        expect(p.locator("[data-status=draining] dd")).to_have_text("1")
        assert p.evaluate("() => window.stillTheSamePage") is True
        expect(p.locator("#banner")).to_be_hidden()  # no "Live updates paused" banner
        check_accessibility(p, "overview-bound")
        p.goto(server.url + "/ui/#/concepts/" + "http%3A%2F%2Fexample.org%2Fobras%23Obra")
        mentions = p.get_by_role("region", name="Instances whose tags mention it")
        expect(mentions.locator("tbody tr")).to_have_count(2)  # trens and metro; not gw, livros nor pinturas
        expect(mentions.get_by_role("link", name="trens")).to_be_visible()
    finally:
        staging.put("/v1/instances/livros/heartbeat", json={"status": "up"}).raise_for_status()
        staging.delete("/v1/instances/onibus")


def test_paging_past_ten_thousand_instances(start_server, browser):
    """No tokens here: the console opens without a sign-in, and pages through 10,050 instances."""
    server = start_server(data_dir=None)
    with httpx.Client(base_url=server.url, timeout=60) as api:
        for first in (0, 5025):
            batch = [{"id": f"i{n:05d}", "service": f"svc{n % 7}", "address": "127.0.0.1", "port": 10000 + n % 50000,
                      "ttl": 0} for n in range(first, first + 5025)]
            assert api.post("/v1/instances/batch", json={"instances": batch}).json() == {"registered": 5025}
    page = browser.new_page()
    watched = Watched(page)
    listed: list[str] = []  # every read of instances the pages make: each a page of them, never all
    page.on("request", lambda r: listed.append(r.url) if "/v1/instances" in r.url and r.method == "GET" else None)
    try:
        port = closed_port()  # one of them failing its check: the overview names it, reading a page of the failing
        httpx.put(f"{server.url}/v1/instances/i00001", json={"service": "svc1", "address": "127.0.0.1", "port": port,
                  "ttl": 0, "check": {"tcp": f"127.0.0.1:{port}", "interval": 3600}}).raise_for_status()
        page.goto(server.url + "/ui/#/")
        expect(page.get_by_test_id("failing").locator("li[data-service=svc1]")).to_contain_text("1 critical: i00001")
        page.goto(server.url + "/ui/#/instances")
        expect(page.get_by_text("No tokens in force: open access")).to_be_visible()
        expect(page.get_by_test_id("summary")).to_have_text("10050 instances; 1–50 shown.")
        page.get_by_role("spinbutton", name="Page").fill("201")
        page.get_by_role("button", name="Go").click()
        expect(page.get_by_test_id("summary")).to_have_text("10050 instances; 10001–10050 shown.")
        expect(page.locator("tbody tr")).to_have_count(50)
        expect(page.get_by_role("button", name="Next")).to_be_disabled()
        page.get_by_role("button", name="Previous").click()
        expect(page.get_by_test_id("summary")).to_have_text("10050 instances; 9951–10000 shown.")
        page.get_by_role("button", name="Next").click()
        expect(page.get_by_test_id("summary")).to_have_text("10050 instances; 10001–10050 shown.")
        page.get_by_label("Service").fill("svc3")
        page.get_by_role("button", name="Search").click()
        expect(page.get_by_test_id("summary")).to_have_text("1436 instances; 1–50 shown.")
        expect(page.locator("tr[data-id=i00003] .badge")).to_have_text("up")
        with httpx.Client(base_url=server.url, timeout=60) as api:  # live: a row's status, then one more
            api.put("/v1/instances/i00003/heartbeat", json={"status": "draining"}).raise_for_status()
            expect(page.locator("tr[data-id=i00003] .badge")).to_have_text("draining")
            api.put("/v1/instances/i00000x", json={"service": "svc3", "address": "127.0.0.1", "port": 9999,
                                                   "ttl": 0}).raise_for_status()
            expect(page.get_by_test_id("summary")).to_have_text("1437 instances; 1–50 shown.")
            expect(page.locator("tbody tr").first).to_have_attribute("data-id", "i00000x")
        snapshot(page, "instances-10050")
        assert listed and all(re.search(r"[?&]limit=(50|100)(&|$)", url) for url in listed), listed
    finally:
        page.close()
    watched.assert_clean()


def test_an_edit_keeps_every_field_the_form_does_not_show(registry, page):
    """Edit and Save with nothing changed leaves the registration as it was: the environment, the meta, the
    check's interval and timeout, the capacity, the weight and the deregister_after all come back."""
    server, api = registry
    p = page.page
    body = {"service": "stg", "address": "127.0.0.1", "port": 9400, "ttl": 0, "tags": ["ex:Obra"],
            "environment": "staging", "meta": {"zone": "b", "version": "1.2"}, "capacity": 7, "weight": 3,
            "deregister_after": 600, "check": {"tcp": "127.0.0.1:9", "interval": 3600, "timeout": 1.5}}
    assert api.put("/v1/instances/stg-1", json=body).status_code == 201
    try:
        before = api.get("/v1/instances/stg-1").json()
        sign_in(page, server.url)
        p.goto(server.url + "/ui/#/instances/stg-1/edit")
        expect(p.get_by_role("heading", name="Edit stg-1")).to_be_visible()
        expect(p.get_by_role("textbox", name="Tags")).to_have_value("ex:Obra")
        p.get_by_role("button", name="Save").click()
        expect(p.get_by_role("heading", name="Instance stg-1")).to_be_visible()
        after = api.get("/v1/instances/stg-1").json()
        kept = ("service", "environment", "address", "port", "scheme", "tags", "weight", "capacity", "ttl",
                "deregister_after", "check", "meta", "owner")
        assert {k: after.get(k) for k in kept} == {k: before.get(k) for k in kept}
    finally:
        api.delete("/v1/instances/stg-1")


def closed_port() -> int:
    """A local port nothing listens on (bound, then let go)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_critical_instance_says_why_and_the_overview_says_which(registry, page):
    """A failing check: which one, its target, what it answered and when, and when the instance is deleted;
    a lapsed lease: when it ran out. The overview names them by service; the list says why in a word."""
    server, api = registry
    p = page.page
    port = closed_port()
    checked = {"service": "pagamentos", "address": "127.0.0.1", "port": port, "ttl": 0, "tags": ["ex:Obra"],
               "check": {"tcp": f"127.0.0.1:{port}", "interval": 3600, "timeout": 1}}
    leased = {"service": "pagamentos", "address": "127.0.0.1", "port": 9501, "ttl": 1, "deregister_after": 3600}
    assert api.put("/v1/instances/pag-1", json=checked).status_code == 201
    assert api.put("/v1/instances/pag-2", json=leased).status_code == 201
    try:
        sign_in(page, server.url)
        failing = p.get_by_test_id("failing")
        expect(failing.locator("li[data-service=pagamentos]")).to_contain_text("2 critical: pag-1, pag-2")
        expect(failing.get_by_role("heading")).to_have_text("Failing (2)")
        check_accessibility(p, "overview-failing")
        failing.get_by_role("link", name="pag-1").click()
        why = p.get_by_test_id("why-critical")
        expect(why).to_contain_text(f"Its check failed: TCP 127.0.0.1:{port} answered ConnectionRefusedError")
        expect(why).to_contain_text(" UTC")
        expect(p.get_by_test_id("critical-since")).to_contain_text(
            "It stays listed until it recovers or is deregistered.")  # ttl 0: never deleted unless asked
        expect(p.get_by_test_id("status")).to_have_text("critical")
        expect(p.locator("dd", has_text="none (ttl 0): registered until deregistered")).to_have_count(1)
        check_accessibility(p, "instance-critical")
        p.goto(server.url + "/ui/#/instances/pag-2")
        expect(p.get_by_test_id("why-critical")).to_contain_text("Its lease lapsed: no heartbeat within its ttl of 1 s")
        expect(p.get_by_test_id("critical-since")).to_contain_text("Deleted at ")
        p.goto(server.url + "/ui/#/instances?status=critical")
        expect(p.locator("tr[data-id=pag-1] td.health")).to_contain_text("check failing: ConnectionRefusedError")
        expect(p.locator("tr[data-id=pag-2] td.health")).to_have_text("lease lapsed")
        check_accessibility(p, "instances-critical")
    finally:
        for iid in ("pag-1", "pag-2"):
            api.delete(f"/v1/instances/{iid}")


def test_the_list_shows_tags_health_and_expiry(registry, page):
    server, _ = registry
    p = page.page
    sign_in(page, server.url)
    p.goto(server.url + "/ui/#/instances")
    livros = p.locator("tr[data-id=livros]")
    expect(livros.locator("td.tags")).to_contain_text("ex:Obra a ex:Livro")
    expect(livros.locator("td.health")).to_have_text("no check, no lease")
    expect(livros).to_contain_text("no lease")
    expect(livros.locator(".badge")).to_have_count(1)


def test_the_class_tree_is_rooted_at_owl_thing_and_a_source_is_viewable(registry, page):
    server, _ = registry
    p = page.page
    sign_in(page, server.url)
    p.goto(server.url + "/ui/#/ontologies")
    tree = p.get_by_role("list", name="Class tree")
    expect(tree.locator(":scope > li").first).to_contain_text("owl:Thing")
    expect(tree.locator(":scope > li > ul > li > a", has_text="ex:Obra")).to_have_count(1)
    expect(tree.locator(":scope > li").filter(has_text="ex:Obra").filter(has_not_text="owl:Thing")).to_have_count(0)
    expect(tree.locator(":scope > li")).to_have_count(2)  # owl:Thing holding every class, then owl:Nothing
    expect(tree.locator(":scope > li").last).to_have_text("owl:Nothing the empty class")
    expect(tree.locator("li li", has_text="owl:Nothing")).to_have_count(0)
    p.get_by_role("button", name="Source of obras").click()
    source = p.get_by_role("region", name="Source of obras")
    expect(source.locator("pre")).to_contain_text("Livro")
    check_accessibility(p, "ontology-source")
