"""A Consul service definition as a semreg registration, and Go's durations: the mapping as plain data; then the
property that no body, however made, gets a 500 from the register route, and a refused one changes nothing."""
from __future__ import annotations

from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.paths import ONTOLOGIES

from semreg.consul import durations
from semreg.consul.registration import definition
from semreg.consul.tags import TAGS_KEY, consul_tags, is_pattern
from semreg.errors import BadRequest
from semreg.rdf.terms import PrefixMap

EX = "http://example.org/obras#"


@pytest.fixture(scope="module")
def prefixes() -> PrefixMap:
    p = PrefixMap()
    p.set("ex", EX)
    return p


@pytest.mark.parametrize("text, seconds", [("10s", 10), ("500ms", 0.5), ("1m30s", 90), ("120000ms", 120), ("1h", 3600),
                                           ("1.5s", 1.5), ("0", 0), ("250us", 0.00025)])
def test_go_durations(text, seconds):
    assert durations.seconds(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "10", "-1s", "s", "1x", "1s2", "1e400s", " 1s", "1 s"])
def test_what_is_not_a_go_duration(text):
    with pytest.raises(ValueError):
        durations.seconds(text)


def test_pattern_tags_are_three_known_terms_or_one_bracketed_iri(prefixes):
    assert is_pattern("ex:Livro ex:temUmGenero ex:Terror", prefixes)
    assert is_pattern(f"<{EX}Livro>", prefixes)
    assert is_pattern("ex:Livro a ex:Obra", prefixes)
    for plain in ("blue", "ex:Livro", "env:prod", "traefik.enable=true", "a b c", "zz:Livro ex:temUmGenero ex:Terror"):
        assert not is_pattern(plain, prefixes), plain


def test_a_definition_maps_every_field(prefixes):
    got = definition({"id": "a1", "NAME": "svc", "Tags": ["ex:Livro ex:temUmGenero ex:Terror", "blue", "blue"],
                      "Port": 80, "Meta": {"Team": "x"}, "Weights": {"Passing": 5, "Warning": 1},
                      "Checks": [{"ttl": "20s", "Status": "warning"},
                                 {"TCP": "10.0.0.1:80", "Interval": "5s", "DeregisterCriticalServiceAfter": "2m"}]},
                     prefixes, "10.9.9.9", "default")
    assert got.ttl_status == "warning"
    assert got.body == {"id": "a1", "service": "svc", "address": "10.9.9.9", "port": 80,
                        "tags": ["ex:Livro ex:temUmGenero ex:Terror"], "weight": 5,
                        "meta": {"Team": "x", TAGS_KEY: '["ex:Livro ex:temUmGenero ex:Terror","blue"]'},
                        "environment": "default", "ttl": 20.0, "deregister_after": 120.0,
                        "check": {"tcp": "10.0.0.1:80", "interval": 5.0}}
    assert consul_tags(got.body["meta"], ()) == ["ex:Livro ex:temUmGenero ex:Terror", "blue"]


def test_a_field_given_twice_in_two_cases_is_refused(prefixes):
    with pytest.raises(BadRequest, match="twice"):
        definition({"Name": "a", "name": "b", "Port": 1}, prefixes, "h", "default")


# -- any body, through the route ---------------------------------------------------------------------------------
SCALARS = (st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False, allow_infinity=False)
           | st.text(max_size=20))
JSON = st.recursive(SCALARS,
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=5),
                    max_leaves=20)
KEYS = st.sampled_from(["ID", "Name", "Tags", "Address", "Port", "Meta", "Weights", "Check", "Checks", "name", "port",
                        "Namespace", "Kind", "TTL", "HTTP", "TCP", "Interval", "Timeout", "Status",
                        "DeregisterCriticalServiceAfter", "checks", "Args"])
VALUES = st.one_of(JSON, st.sampled_from(["10s", "0s", "-1s", "x", "ex:Livro ex:temUmGenero ex:Terror", "passing",
                                          "critical", "http://10.0.0.1/h", "10.0.0.1:80", "s1", 80, 0, 65536]))
CHECKS = st.dictionaries(KEYS, VALUES, max_size=5)
BODIES = st.one_of(JSON, st.dictionaries(KEYS, st.one_of(VALUES, CHECKS, st.lists(CHECKS, max_size=3)), max_size=9))


@pytest.fixture(scope="module")
def consul_app():
    from support.inprocess import InProcess

    srv = InProcess(consul_listen="127.0.0.1:8500").start()
    try:
        assert srv.client().put("/v1/ontologies/obras", content=(ONTOLOGIES / "obras.ttl").read_bytes(),
                                headers={"Content-Type": "text/turtle"}).status_code == 201
        yield srv
    finally:
        srv.stop()


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=BODIES)
def test_no_register_body_gets_a_500_and_a_refused_one_changes_nothing(consul_app, body):
    before = consul_app.client().get("/v1/instances").json()
    r = consul_app.consul().put("/v1/agent/service/register", json=body)
    assert r.status_code in (200, 400), r.text
    if r.status_code == 400:
        assert r.headers["content-type"].startswith("text/plain") and r.text
        assert consul_app.client().get("/v1/instances").json() == before
    else:
        assert consul_app.consul().put(f"/v1/agent/service/deregister/{registered_id(body)}").status_code == 200


def registered_id(body: dict) -> str:
    """The ID a registration that was accepted took (Consul's default: the name)."""
    folded = {k.lower(): v for k, v in body.items()}
    return folded.get("id") or folded["name"]


PATHS = st.sampled_from(["/v1/health/service/livros", "/v1/catalog/service/livros", "/v1/catalog/services",
                         "/v1/catalog/nodes", "/v1/agent/services", "/v1/agent/service/livros", "/v1/agent/self",
                         "/v1/status/leader", "/v1/health/service/x%00y", "/v1/agent/service/%FF"])
PARAMS = st.dictionaries(st.sampled_from(["index", "wait", "passing", "tag", "ns", "dc", "filter", "stale", "near"]),
                         st.text(max_size=30) | st.sampled_from(["0", "1", "-1", "99999999999999999999999", "1e9s"]),
                         max_size=4)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=PATHS, params=PARAMS, check=st.text(max_size=40), update=BODIES)
def test_no_read_or_check_update_gets_a_500(consul_app, path, params, check, update):
    """Reads with any parameters (a wait that would block is cut to nothing by index 0 or answered at once by a
    foreign index), and check updates of any check with any body."""
    params = {**params, "index": "0"} if "index" in params and params["index"].isdigit() else params
    r = consul_app.consul().get(path, params=params)
    assert r.status_code < 500, (path, params, r.text)
    r = consul_app.consul().put(f"/v1/agent/check/update/{quote(check, safe='')}", json=update)
    assert r.status_code in (400, 404), r.text
