"""Backup and restore over HTTP, in this process (docs/how-to/backup-restore.md): a backup restored into a fresh
app answers as the original did; owners survive; a registry that holds something is refused unless forced;
a corrupt or truncated body is a 400 naming the line and changes nothing; only admin tokens may do either."""
from __future__ import annotations

import gzip
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.backups import holding_one
from support.paths import ONTOLOGIES

GZ = {"Content-Type": "application/gzip"}
ADMIN, A, B, R = "t-admin-0123456789ab", "t-a-0123456789ab", "t-b-0123456789ab", "t-r-0123456789ab"
TOKENS = {"tokens": [{"name": "ops", "token": ADMIN, "scopes": ["admin"]},
                     {"name": "team-a", "token": A, "scopes": ["read", "write"]},
                     {"name": "team-b", "token": B, "scopes": ["read", "write"]},
                     {"name": "reader", "token": R, "scopes": ["read"]}]}
LIVE = ("expires_at", "load")  # what a restore does not carry over: a fresh lease, no load reported yet


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def fill(c, n: int = 12) -> None:
    """The case study's ontology, a prefix, and instances of every shape: tags, meta, checks, statuses."""
    r = c.put("/v1/ontologies/obras", content=(ONTOLOGIES / "obras.ttl").read_bytes(), headers={"Content-Type": "text/turtle"})
    assert r.status_code == 201, r.text
    assert c.put("/v1/prefixes/zz", json={"iri": "http://zz.example/"}).status_code == 201
    kinds = ["Livro", "Filme", "Pintura"]
    for k in range(n):
        body = {"service": f"svc{k % 3}", "address": f"10.0.0.{k + 1}", "port": 8000 + k, "weight": 1 + k % 4,
                "tags": [f"ex:{kinds[k % 3]} ex:temUmGenero ex:Terror", "ex:Obra a ex:Livro"][: 1 + k % 2],
                "meta": {"zone": "abc"[k % 3], "note": 'quote " and\nnewline'}, "ttl": 0,
                "environment": "staging" if k % 5 == 4 else "default"}
        if k == 3:
            body["check"] = {"tcp": "127.0.0.1:1", "interval": 60}
        if k == 5:
            body["capacity"] = 9
        assert c.put(f"/v1/instances/i{k:02d}", json=body).status_code == 201
    assert c.put("/v1/instances/i07/heartbeat", json={"status": "draining"}).status_code == 200
    assert c.delete("/v1/instances/i08").status_code == 204
    assert c.put("/v1/instances/i09", json={"service": "moved", "address": "10.9.9.9", "port": 1, "ttl": 0,
                                            "tags": ["ex:Filme"]}).status_code == 200


def answers(c) -> dict:
    """What a client sees: instances (without live fields), discovery, tags, ontologies, prefixes, SPARQL."""
    def strip(views):
        return [{k: v for k, v in i.items() if k not in LIVE} for i in views]
    discovered = c.get("/v1/discover", params={"s": "ex:Obra", "p": "ex:temUmGenero", "o": "ex:Terror",
                                               "match": "all", "environment": "*"}).json()
    ontologies = [{k: v for k, v in o.items() if k != "uploaded_at"} for o in c.get("/v1/ontologies").json()]
    sparql = c.post("/sparql", content="SELECT ?id ?st WHERE { ?i a <https://w3id.org/semreg#Instance> ; "
                                       "<https://w3id.org/semreg#id> ?id ; <https://w3id.org/semreg#status> ?st } ORDER BY ?id",
                    headers={"Content-Type": "application/sparql-query"}).json()["results"]["bindings"]
    return {"instances": strip(c.get("/v1/instances", params={"environment": "*"}).json()),
            "discover": [(i["id"], i["match"]["degree"]) for i in discovered["instances"]],
            "tags": c.get("/v1/tags", params={"environment": "*"}).json(), "ontologies": ontologies,
            "prefixes": c.get("/v1/prefixes").json(), "sparql": sparql}


@pytest.fixture(scope="module")
def source(app_server):
    c = app_server.client()
    fill(c)
    r = c.get("/v1/backup")
    assert r.status_code == 200, r.text
    return c, r


def test_a_backup_is_gzipped_n_quads_named_for_when_it_was_taken(source):
    _, r = source
    assert r.headers["content-type"] == "application/gzip"
    assert r.headers["content-disposition"].startswith('attachment; filename="semreg-backup-')
    assert r.headers["content-disposition"].endswith('.nq.gz"')
    text = gzip.decompress(r.content).decode()
    assert text.startswith("# semreg backup 1, taken ")
    assert text.rstrip().splitlines()[-1].startswith("<urn:semreg:backup> ")
    assert "urn:semreg:instance:i08" not in text  # removed: not in it


def test_a_restore_into_a_fresh_app_answers_as_the_original(source, in_process):
    c, r = source
    target = in_process().client()
    restored = target.post("/v1/restore", content=r.content, headers=GZ)
    assert restored.status_code == 200, restored.text
    assert restored.json() == {"instances": 11, "ontologies": 1, "prefixes": 1, "queries": 0}
    before, after = answers(c), answers(target)
    for key in before:
        assert after[key] == before[key], key
    assert next(i for i in after["instances"] if i["id"] == "i07")["status"] == "draining"


def test_a_registry_that_holds_something_is_refused_unless_forced(source, in_process):
    c, r = source
    target = in_process().client()
    assert target.put("/v1/instances/other", json={"service": "x", "address": "10.1.1.1", "port": 1,
                                                   "ttl": 0}).status_code == 201
    assert target.put("/v1/instances/i00", json={"service": "older", "address": "10.1.1.2", "port": 2,
                                                 "ttl": 0}).status_code == 201
    refused = target.post("/v1/restore", content=r.content, headers=GZ)
    assert refused.status_code == 409 and "force" in refused.json()["error"] and refused.json()["instances"] == 2
    assert [i["id"] for i in target.get("/v1/instances").json()] == ["i00", "other"]
    forced = target.post("/v1/restore", params={"force": "true"}, content=r.content, headers=GZ)
    assert forced.status_code == 200, forced.text
    ids = {i["id"]: i for i in target.get("/v1/instances", params={"environment": "*"}).json()}
    assert "other" in ids and ids["i00"]["service"] == "svc0"  # the backup's copy replaced it; the rest stays
    assert len(ids) == 12


def test_a_node_holding_only_the_backups_own_ontology_counts_as_empty(source, in_process):
    """A node started with the ontology its backup also holds (`--ontology`) takes the restore; one whose
    ontology of that name differs is refused, in one sentence naming it and the way out."""
    c, r = source
    same = in_process().client()
    assert same.put("/v1/ontologies/obras", content=(ONTOLOGIES / "obras.ttl").read_bytes(),
                    headers={"Content-Type": "text/turtle"}).status_code == 201
    restored = same.post("/v1/restore", content=r.content, headers=GZ)
    assert restored.status_code == 200, restored.text
    assert answers(same)["instances"] == answers(c)["instances"]
    other = in_process().client()
    changed = (ONTOLOGIES / "obras.ttl").read_bytes() + b"\n<http://example.org/obras#Extra> a owl:Class .\n"
    assert other.put("/v1/ontologies/obras", content=changed, headers={"Content-Type": "text/turtle"}).status_code == 201
    refused = other.post("/v1/restore", content=r.content, headers=GZ)
    error = refused.json()["error"]
    assert refused.status_code == 409 and refused.json()["ontologies"] == 1
    assert "1 ontologies the backup does not hold as they are (obras)" in error and "--force" in error
    assert error.count(". ") == 0 and error.endswith(".")  # one sentence, with its way out


def test_a_corrupt_or_truncated_body_is_refused_naming_the_line_and_changes_nothing(source, in_process):
    _, r = source
    target = in_process().client()
    lines = gzip.decompress(r.content).decode().splitlines(keepends=True)
    broken = lines[:5] + ["<urn:x> <urn:y> not a term <urn:g> .\n"] + lines[5:]
    bad = target.post("/v1/restore", content=gzip.compress("".join(broken).encode()), headers=GZ)
    assert bad.status_code == 400 and bad.json()["line"] == 6 and "line 6" in bad.json()["error"]
    cut = target.post("/v1/restore", content=r.content[:-40], headers=GZ)
    assert cut.status_code == 400 and "ends early after line" in cut.json()["error"]
    at_a_line = gzip.compress("".join(lines[:-1]).encode())  # cut at a line's end: the summary is missing
    short = target.post("/v1/restore", content=at_a_line, headers=GZ)
    assert short.status_code == 400 and "incomplete" in short.json()["error"]
    for body, status in ((b"", 400), (b"not gzip at all", 400), (gzip.compress(b"<a> <b> <c> .\n"), 400)):
        assert target.post("/v1/restore", content=body, headers=GZ).status_code == status
    assert target.post("/v1/restore", content=r.content, headers={"Content-Type": "text/turtle"}).status_code == 415
    assert target.get("/v1/instances").json() == [] and target.get("/v1/ontologies").json() == []


def test_the_summary_must_match_what_the_file_holds(source, in_process):
    _, r = source
    text = gzip.decompress(r.content).decode()
    fewer = text.replace('<https://w3id.org/semreg#instances> "11"', '<https://w3id.org/semreg#instances> "12"')
    bad = in_process().client().post("/v1/restore", content=gzip.compress(fewer.encode()), headers=GZ)
    assert bad.status_code == 400 and "says 12 instances" in bad.json()["error"]


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    from support.inprocess import InProcess

    path = tmp_path_factory.mktemp("secured") / "tokens.json"
    path.write_text(json.dumps(TOKENS))
    server = InProcess(tokens_file=path)
    try:
        yield server.start()
    finally:
        server.stop()


def test_only_an_admin_token_backs_up_or_restores(secured):
    c = secured.client()
    for token in (A, R):
        assert c.get("/v1/backup", headers=bearer(token)).status_code == 403
        assert c.post("/v1/restore", content=b"x", headers={**GZ, **bearer(token)}).status_code == 403
    assert c.get("/v1/backup").status_code == 401


def test_owners_survive_a_restore(secured, tmp_path):
    from support.inprocess import InProcess

    c = secured.client()
    body = {"service": "cars", "address": "10.2.0.1", "port": 1, "ttl": 0}
    assert c.put("/v1/instances/owned-a", json=body, headers=bearer(A)).status_code == 201
    data = c.get("/v1/backup", headers=bearer(ADMIN)).content
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps(TOKENS))
    target = InProcess(tokens_file=path).start()
    try:
        t = target.client()
        assert t.post("/v1/restore", content=data, headers={**GZ, **bearer(ADMIN)}).status_code == 200
        assert t.get("/v1/instances/owned-a", headers=bearer(R)).json()["owner"] == "team-a"
        assert t.put("/v1/instances/owned-a", json=body, headers=bearer(B)).status_code == 403
        assert t.delete("/v1/instances/owned-a", headers=bearer(B)).status_code == 403
        assert t.put("/v1/instances/owned-a", json={**body, "port": 2}, headers=bearer(A)).status_code == 200
    finally:
        target.stop()


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    """One registry with something in it, for the corruption property: it must never change."""
    with holding_one() as c:
        yield c


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_corruption_is_never_a_500_and_never_changes_the_target(source, target, data):
    _, r = source
    raw = bytearray(r.content)
    plain = bytearray(gzip.decompress(r.content))
    how = data.draw(st.sampled_from(["bytes", "text", "cut"]))
    if how == "bytes":
        for _ in range(data.draw(st.integers(1, 8))):
            raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
        body = bytes(raw)
    elif how == "text":
        for _ in range(data.draw(st.integers(1, 4))):
            plain[data.draw(st.integers(0, len(plain) - 1))] = data.draw(st.sampled_from(b'<>"\\ .\n_:#x\x00\xff'))
        body = gzip.compress(bytes(plain))
    else:
        body = r.content[:data.draw(st.integers(0, len(r.content) - 1))]
    before = target.get("/v1/instances").json()
    answer = target.post("/v1/restore", params={"force": "true"}, content=body, headers=GZ)
    assert answer.status_code < 500, answer.text
    if answer.status_code != 200:
        assert answer.status_code in (400, 409) and answer.json()["error"]
        assert target.get("/v1/instances").json() == before
    else:  # a change that still reads as a backup (a byte of a literal): restored, and the target keeps 'kept'
        assert "kept" in {i["id"] for i in target.get("/v1/instances").json()}
