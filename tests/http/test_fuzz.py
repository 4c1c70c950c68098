"""Schemathesis against the live server from its own /openapi.json: zero 5xx, zero schema violations;
hypothesis properties of the term and tag parsers and of the matching functions."""
from __future__ import annotations

import itertools
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.paths import ONTOLOGIES

from semreg.errors import BadRequest
from semreg.http.schemas import DiscoverView, InstanceView
from semreg.rdf.terms import ANY, PrefixMap, Tag, parse_tag
from semreg.reasoning.matching import DEGREES, combine, parse_match


@pytest.mark.slow
@pytest.mark.process
def test_schemathesis_finds_no_server_error_or_schema_violation(start_server, tmp_path):
    srv = start_server("--ontology", str(ONTOLOGIES / "obras.ttl"))
    exe = Path(sys.executable).with_name("schemathesis")
    assert exe.exists() or shutil.which("schemathesis"), "schemathesis is a test dependency: pip install -e '.[test]'"
    # one worker: with two, hypothesis parses lambda sources with ast in parallel threads, which
    # CPython 3.11 sometimes fails with "AST constructor recursion depth mismatch" (not our API)
    out = subprocess.run([str(exe if exe.exists() else "schemathesis"), "run", srv.url + "/openapi.json",
                          "--checks", "not_a_server_error,response_schema_conformance,status_code_conformance,"
                                      "content_type_conformance",
                          "--max-examples", "25", "--workers", "1", "--seed", "20261130", "--no-color"],
                         capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-2000:]
    assert "passed" in out.stdout
    log = srv.log()
    assert '"level": "error"' not in log and "Traceback" not in log, log[-4000:]


def test_live_responses_match_the_published_models(in_process):
    srv = in_process(ontologies=(ONTOLOGIES / "obras.ttl",))
    with srv.client() as c:
        view = c.put("/v1/instances/a", json={"service": "s", "address": "h", "port": 1, "ttl": 5,
                                              "tags": ["ex:Livro ex:temUmGenero ex:Terror"],
                                              "check": {"tcp": "127.0.0.1:1", "interval": 60}}).json()
        InstanceView.model_validate(view)
        body = c.get("/v1/discover", params={"s": "ex:Obra", "status": "any"}).json()
        DiscoverView.model_validate(body)
        assert body["instances"]


PREFIXES = PrefixMap(explicit={"ex": "http://example.org/ex#"})
printable = st.text(st.characters(blacklist_categories=("Cs",)), max_size=60)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(printable, st.dictionaries(st.sampled_from(["s", "p", "o", "x"]), st.one_of(printable, st.integers(),
                                                                                              st.none())),
                 st.integers(), st.lists(printable, max_size=3), st.none()))
def test_tag_parser_accepts_or_says_why(value):
    """Any input is either a tag of absolute IRIs or a BadRequest with a message: never another error."""
    try:
        tag = parse_tag(value, PREFIXES)
    except BadRequest as exc:
        assert exc.message
        return
    assert isinstance(tag, Tag) and all(":" in t for t in tag)


@given(st.sampled_from(["ex", "rdf", "owl", "sr"]), st.from_regex(r"[A-Za-z][A-Za-z0-9_-]{0,20}", fullmatch=True))
def test_curies_expand_and_compact_round_trip(prefix, local):
    iri = PREFIXES.expand(f"{prefix}:{local}")
    assert PREFIXES.expand(f"<{iri}>") == iri == PREFIXES.expand(iri)
    assert PREFIXES.compact(iri) == f"{prefix}:{local}"


# A tag's degree by its components' degrees other than exact (the contract's rule, written as a table).
TAG_DEGREE = {frozenset(): "exact", frozenset({"narrower"}): "narrower", frozenset({"broader"}): "broader",
              frozenset({"narrower", "broader"}): "overlap"}


@pytest.mark.parametrize("degrees", list(itertools.product(DEGREES[:3], repeat=3)))
def test_combine_is_order_free_and_exact_neutral(degrees):
    """Every combination of component degrees, in every order, gives the degree of the table; a component
    made exact leaves the degree of the other two."""
    assert {combine(order) for order in itertools.permutations(degrees)} == {TAG_DEGREE[frozenset(degrees) - {"exact"}]}
    for k in range(3):
        others = degrees[:k] + degrees[k + 1:]
        assert combine([*others[:k], "exact", *others[k:]]) == TAG_DEGREE[frozenset(others) - {"exact"}]


@given(st.lists(st.sampled_from([*DEGREES, "all"]), min_size=1, max_size=4))
def test_match_lists_parse_to_subsets(parts):
    text = ",".join(parts)
    try:
        got = parse_match(text)
    except BadRequest:
        assert "all" in parts and len(parts) > 1
        return
    assert got <= set(DEGREES) and got


def test_wildcards_are_the_any_term():
    assert parse_tag("ex:A", PREFIXES) == Tag("http://example.org/ex#A", ANY, ANY)
    assert parse_tag({"s": "ex:A", "p": "a"}, PREFIXES).p.endswith("#type")
