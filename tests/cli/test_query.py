"""`semreg query put|get|list|discover|route|delete`, end to end: `python -m semreg` subprocesses against the
app of this process, served on a loopback port."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.process


@pytest.fixture(scope="module")
def url(app_server, api):
    c = api  # the case study's ontology uploaded
    assert c.put("/v1/instances/livro", json={"service": "livros", "address": "10.0.0.1", "port": 80, "ttl": 0,
                                              "tags": ["ex:Livro ex:temUmGenero ex:Terror"]}).status_code == 201
    return app_server.listen()


def semreg(url: str, *args: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("SEMREG_")}
    environ["SEMREG_URL"] = url
    return subprocess.run([sys.executable, "-m", "semreg", *args], check=False, capture_output=True, text=True,
                          env=environ, timeout=60)


def test_the_command_line_saves_shows_asks_and_deletes_a_query(url):
    put = semreg(url, "query", "put", "horror", "--s", "ex:Obra", "--p", "ex:temUmGenero", "--o", "ex:Terror",
                 "--meta", "zone=eu", "--json")
    assert put.returncode == 0, put.stderr
    assert json.loads(put.stdout)["meta"] == {"zone": "eu"}
    assert semreg(url, "query", "put", "horror", "--s", "ex:Obra", "--p", "ex:temUmGenero",
                  "--o", "ex:Terror").returncode == 0
    listed = semreg(url, "query", "list")
    assert listed.returncode == 0 and listed.stdout.splitlines()[1].split()[0] == "horror"
    # CURIEs, and the columns no query uses (META, LIMIT, OWNER) left out: narrow enough for a terminal
    assert listed.stdout.splitlines()[0].split() == ["NAME", "PATTERN", "MATCH", "ENVIRONMENT"]
    assert listed.stdout.splitlines()[1].split() == ["horror", "ex:Obra", "ex:temUmGenero", "ex:Terror",
                                                     "exact,narrower", "default"]
    assert max(len(line) for line in listed.stdout.splitlines()) <= 80
    assert "ex:Obra ex:temUmGenero ex:Terror" in semreg(url, "query", "get", "horror").stdout
    shown = semreg(url, "query", "get", "horror", "--json")
    assert json.loads(shown.stdout)["s"] == "http://example.org/obras#Obra"
    found = semreg(url, "query", "discover", "horror")
    assert found.returncode == 0 and "livro" in found.stdout
    routed = semreg(url, "query", "route", "horror", "--path", "/books")
    assert routed.returncode == 0 and routed.stdout.strip() == "http://10.0.0.1:80/books"
    assert semreg(url, "query", "delete", "horror").returncode == 0
    assert semreg(url, "query", "get", "horror").returncode != 0


def test_the_command_line_says_why_a_query_is_refused(url):
    bad = semreg(url, "query", "put", "Not_A_Label", "--s", "ex:Obra")
    assert bad.returncode != 0 and "DNS label" in bad.stderr
    meta = semreg(url, "query", "put", "m", "--s", "ex:Obra", "--meta", "novalue")
    assert meta.returncode != 0 and "KEY=VALUE" in meta.stderr


def test_the_command_line_asks_and_saves_several_patterns(url):
    found = semreg(url, "discover", "ex:Obra", "ex:temUmGenero", "ex:Terror", "--and", "ex:Livro", "--json")
    assert found.returncode == 0, found.stderr
    body = json.loads(found.stdout)
    assert [i["id"] for i in body["instances"]] == ["livro"] and len(body["query"]["all"]) == 2
    table = semreg(url, "discover", "ex:Obra ex:temUmGenero ex:Terror", "--provided", "ex:Filme ex:temUmGenero ex:Terror")
    assert table.returncode == 0 and "no instances match" in table.stdout  # livro needs a Livro's genre tag
    put = semreg(url, "query", "put", "both", "--all", "ex:Obra ex:temUmGenero ex:Terror", "--all", "ex:Livro")
    assert put.returncode == 0, put.stderr
    assert "saved both: ex:Obra ex:temUmGenero ex:Terror & ex:Livro (match" in put.stdout  # CURIEs, as typed
    assert "livro" in semreg(url, "query", "discover", "both").stdout
    neither = semreg(url, "query", "put", "x", "--s", "ex:Obra", "--all", "ex:Livro")
    assert neither.returncode != 0 and "not both" in neither.stderr
    assert semreg(url, "query", "delete", "both").returncode == 0
