"""What the console reads at 100,000 instances, in this process over HTTP on a fake clock: a page of
`GET /v1/instances` (limit, offset, the `after` cursor, filters by service, status, tag and environment,
the total in `X-Semreg-Total`), with a request that names none of them answering as before; the counts
of `GET /v1/summary`; and `GET /v1/changes`, the blocking read that tells the console's open view what
changed. Tokens bound to environments get only their environments' counts and changes; bad parameters
are a 400 naming them, never a 500."""
from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.inprocess import InProcess
from support.paths import ONTOLOGIES

ADMIN, STAGE = "t-admin-0123456789ab", "t-stage-0123456789ab"
TOKENS = {"tokens": [{"name": "ops", "token": ADMIN, "scopes": ["admin"]},
                     {"name": "stage", "token": STAGE, "scopes": ["read", "write"], "environments": ["staging"]}]}
TAGS = ["ex:Obra a ex:Livro", "ex:Livro ex:temUmGenero ex:Terror", "ex:Filme ex:temUmGenero ex:Drama"]
EX = "http://example.org/obras#"


def body(n: int, environment: str = "default") -> dict:
    return {"id": f"c{n:03d}", "service": f"s{n % 3}", "address": "10.0.0.1", "port": 9000 + n, "ttl": 0,
            "tags": [TAGS[n % 3]], "environment": environment}


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    """30 instances in `default` (services s0-s2, c000-c029), 5 in `staging` (c100-c104); c001 draining."""
    path = tmp_path_factory.mktemp("console-paging") / "tokens.json"
    path.write_text(json.dumps(TOKENS))
    with InProcess(tokens_file=path) as server:
        admin = server.client(ADMIN)
        assert admin.put("/v1/ontologies/obras", content=(ONTOLOGIES / "obras.ttl").read_bytes(),
                         headers={"Content-Type": "text/turtle"}).status_code == 201
        batch = [body(n) for n in range(30)] + [body(n, "staging") for n in range(100, 105)]
        assert admin.post("/v1/instances/batch", json={"instances": batch}).json() == {"registered": 35}
        admin.put("/v1/instances/c001/heartbeat", json={"status": "draining"}).raise_for_status()
        yield server


def ids(response) -> list[str]:
    assert response.status_code == 200, response.text
    return [view["id"] for view in response.json()]


def test_a_list_without_the_new_parameters_answers_as_before_and_a_cursor_walks_it(registry):
    api = registry.client(ADMIN)
    whole = api.get("/v1/instances", params={"tags": "false"})
    assert "x-semreg-total" not in whole.headers
    walked, after = [], ""
    while True:
        page = api.get("/v1/instances", params={"tags": "false", "limit": 7, "after": after})
        assert page.headers["x-semreg-total"] == "30"
        if not page.json():
            break
        walked += page.json()
        after = page.json()[-1]["id"]
    assert walked == whole.json() and ids(whole) == sorted(ids(whole))


def test_offset_limit_and_the_total(registry):
    api = registry.client(ADMIN)
    page = api.get("/v1/instances", params={"limit": 5, "offset": 10, "environment": "*"})
    assert ids(page) == [f"c{n:03d}" for n in range(10, 15)] and page.headers["x-semreg-total"] == "35"
    assert "tags" in page.json()[0]  # views as the list has them unless tags=false
    last = api.get("/v1/instances", params={"limit": 50, "offset": 30, "environment": "*", "tags": "false"})
    assert ids(last) == [f"c{n}" for n in range(100, 105)] and "tags" not in last.json()[0]
    assert ids(api.get("/v1/instances", params={"offset": 40, "environment": "*"})) == []
    both = api.get("/v1/instances", params={"after": "c027", "offset": 1, "limit": 3, "environment": "*"})
    assert ids(both) == ["c029", "c100", "c101"]


@pytest.mark.parametrize("params, expected", [
    ({"service": "s1", "limit": 3}, ["c001", "c004", "c007"]),
    ({"status": "draining"}, ["c001"]),
    ({"status": "up", "service": "s1", "limit": 2}, ["c004", "c007"]),
    ({"tag": "ex:Drama", "limit": 3}, ["c002", "c005", "c008"]),  # a term in any position
    ({"tag": f"<{EX}Livro>", "limit": 4}, ["c000", "c001", "c003", "c004"]),  # as subject or object
    ({"tag": "ex:Obra a ex:Livro", "limit": 2}, ["c000", "c003"]),  # a whole tag
    ({"tag": "ex:Obra a ex:Terror"}, []),
    ({"environment": "staging", "limit": 2, "tag": "a"}, ["c102"]),
])
def test_filters_apply_on_the_server(registry, params, expected):
    assert ids(registry.client(ADMIN).get("/v1/instances", params=params)) == expected


@pytest.mark.parametrize("params, field", [
    ({"limit": "0"}, "limit"), ({"limit": "1001"}, "limit"), ({"limit": "ten"}, "limit"), ({"offset": "-1"}, "offset"),
    ({"after": "not an id"}, "after"), ({"status": "asleep"}, "status"), ({"tag": "nope:Thing"}, "tag"),
    ({"tag": "ex:Livro ex:temUmGenero"}, "tag"), ({"tag": "ex:Obra a"}, "tag"), ({"limit": "5", "sort": "id"}, "sort"),
])
def test_bad_parameters_are_a_400_naming_them(registry, params, field):
    r = registry.client(ADMIN).get("/v1/instances", params=params)
    assert r.status_code == 400 and r.json()["field"] == field, r.text


text = st.one_of(st.just(""), st.text(max_size=12), st.from_regex(r"[a-z0-9:.-]{1,8}", fullmatch=True))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.fixed_dictionaries({}, optional={"limit": st.one_of(st.integers(-2, 1200).map(str), text),
                                           "offset": st.one_of(st.integers(-2, 60).map(str), text),
                                           "after": st.one_of(st.sampled_from(["c010", "c1", "zz"]), text),
                                           "status": st.one_of(st.sampled_from(["up", "draining", "critical"]), text),
                                           "tag": st.one_of(st.sampled_from(["ex:Livro", "a", "ex:Obra a ex:Livro"]), text),
                                           "service": st.one_of(st.sampled_from(["s0", "s2"]), text),
                                           "environment": st.sampled_from(["*", "default", "staging", "prod", ""])}))
def test_any_paging_parameters_answer_a_page_or_a_400(registry, params):
    r = registry.client(ADMIN).get("/v1/instances", params=params)
    assert r.status_code in (200, 400), r.text
    if r.status_code == 400:
        assert r.json()["field"] in params
        return
    got = ids(r)
    assert got == sorted(got) and len(set(got)) == len(got)
    if any(params.get(name) for name in ("limit", "offset", "after", "status", "tag")):
        assert len(got) <= int(r.headers["x-semreg-total"])
        assert not params.get("limit") or len(got) <= int(params["limit"])
        assert not params.get("after") or all(i > params["after"] for i in got)


def test_a_bound_token_pages_its_environment_only(registry):
    stage = registry.client(STAGE)
    assert stage.get("/v1/instances", params={"limit": 5}).status_code == 403  # `default` is not its own
    assert stage.get("/v1/instances", params={"limit": 5, "environment": "*"}).status_code == 403
    page = stage.get("/v1/instances", params={"limit": 2, "offset": 1, "environment": "staging"})
    assert ids(page) == ["c101", "c102"] and page.headers["x-semreg-total"] == "5"


def test_the_summary_counts_what_the_token_sees(registry):
    every = registry.client(ADMIN).get("/v1/summary").json()
    assert every == {"instances": 35, "by_status": {"up": 34, "draining": 1, "blocked": 0, "critical": 0},
                     "services": {"s0": 11, "s1": 12, "s2": 12}, "environments": {"default": 30, "staging": 5},
                     "tags": 3, "ontologies": 1, "concepts": every["concepts"]}
    assert every["concepts"] > 10
    one = registry.client(ADMIN).get("/v1/summary", params={"environment": "staging"}).json()
    assert (one["instances"], one["environments"], one["services"]) == (5, {"staging": 5}, {"s0": 1, "s1": 2, "s2": 2})
    stage = registry.client(STAGE)
    assert stage.get("/v1/summary").json() == one
    assert stage.get("/v1/summary", params={"environment": "staging"}).json() == one
    for environment in ("default", "*"):
        r = stage.get("/v1/summary", params={"environment": environment})
        assert r.status_code == 403 and "staging" in r.json()["error"]
    assert registry.client(ADMIN).get("/v1/summary", params={"environment": "\x01"}).status_code == 400
    assert registry.client().get("/v1/summary").status_code == 401


def start(client, **params) -> str:
    first = client.get("/v1/changes", params=params)
    assert first.json() == {"changes": [], "reset": False}
    return first.headers["x-semreg-index"]


def test_changes_name_the_instances_that_changed_and_wake_only_their_readers(registry):
    admin, stage = registry.client(ADMIN), registry.client(STAGE)
    index, staged = start(admin), start(stage)
    every = admin.submit("GET", f"/v1/changes?index={index}&wait=60s")
    mine = stage.submit("GET", f"/v1/changes?index={staged}&wait=60s")
    registry.settle()
    admin.put("/v1/instances/c010/heartbeat", json={"load": 3}).raise_for_status()  # a load report: no change
    registry.settle()
    assert not every.done()
    admin.put("/v1/instances/c010/heartbeat", json={"status": "blocked"}).raise_for_status()
    registry.settle()
    answer = every.result(10)
    assert answer.json() == {"changes": [{"id": "c010", "reason": "status", "status": "blocked", "services": ["s1"],
                                          "environments": ["default"]}], "reset": False}
    assert not mine.done()  # another environment's change does not wake a bound reader
    admin.put("/v1/instances/c103", json=body(103, "staging") | {"service": "moved"}).raise_for_status()
    registry.settle()
    assert mine.result(10).json()["changes"] == [{"id": "c103", "reason": "replaced", "status": "up",
                                                  "services": ["moved", "s1"], "environments": ["staging"]}]
    later = admin.get(f"/v1/changes?index={answer.headers['x-semreg-index']}&wait=1s")
    assert [c["id"] for c in later.json()["changes"]] == ["c103"]
    admin.put("/v1/instances/c010/heartbeat", json={"status": "up"}).raise_for_status()
    admin.put("/v1/instances/c103", json=body(103, "staging")).raise_for_status()


def test_a_reader_that_cannot_know_every_change_is_told_to_read_again(registry):
    admin = registry.client(ADMIN)
    index = start(admin)
    for unknown in (0, int(index) + 1000):  # from before a restart, or never given
        assert admin.get(f"/v1/changes?index={unknown}").json() == {"changes": [], "reset": True}
    batch = [body(n) | {"id": f"burst{n}"} for n in range(60)]  # more than one answer carries
    admin.post("/v1/instances/batch", json={"instances": batch}).raise_for_status()
    assert admin.get(f"/v1/changes?index={index}").json() == {"changes": [], "reset": True}
    for n in range(60):
        assert admin.delete(f"/v1/instances/burst{n}").status_code == 204
    for bad, field in (({"index": "x"}, "index"), ({"wait": "5s"}, "wait"), ({"environment": "*", "since": "1"}, "since")):
        r = admin.get("/v1/changes", params=bad)
        assert r.status_code == 400 and r.json()["field"] == field
    assert registry.client(STAGE).get("/v1/changes", params={"environment": "default"}).status_code == 403


def test_a_change_among_ten_thousand_sends_the_open_view_less_than_10_kb():
    """The console's live updates used to be a watch of the whole list (`GET /v1/instances?tags=false&
    environment=*`), answering all of it at every change; now a change is an answer of `GET /v1/changes`,
    after which the overview reads the counts again and a page whose row changed redraws it from the answer."""
    with InProcess() as server:
        api = server.client()
        for first in range(0, 10_000, 2_500):
            batch = [{"id": f"i{n:05d}", "service": f"svc{n % 7}", "address": "10.0.0.1", "port": 10_000 + n,
                      "ttl": 0, "tags": [f"<http://x.org/T{n % 50}>"]} for n in range(first, first + 2_500)]
            assert api.post("/v1/instances/batch", json={"instances": batch}).json()["registered"] == 2_500
        whole = api.get("/v1/instances", params={"tags": "false", "environment": "*"})
        index = start(api)
        change = api.submit("GET", f"/v1/changes?index={index}&wait=60s")
        server.settle()
        api.put("/v1/instances/i04321/heartbeat", json={"status": "draining"}).raise_for_status()
        server.settle()
        notice = change.result(10)
        assert [c["id"] for c in notice.json()["changes"]] == ["i04321"]
        counts = api.get("/v1/summary")
        assert counts.json()["by_status"]["draining"] == 1
        page = api.get("/v1/instances", params={"tags": "false", "limit": 50, "offset": 4300, "environment": "*"})
        assert "i04321" in ids(page)  # the row shown: redrawn from the notice, the page not read again
        sent = size(notice) + size(counts)
        print(f"one change among 10,000: {size(whole)} bytes before, {size(notice)} + {size(counts)} now")
        assert sent < 10_000, sent
        assert size(whole) > 2_500_000  # what every change used to send


def size(response) -> int:
    """The bytes of an answer: its body and its header lines."""
    return len(response.content) + sum(len(k) + len(v) + 4 for k, v in response.headers.items())
