"""The client commands, end to end: `python -m semreg ...` subprocesses against a real server."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import uuid

import httpx
import pytest
from support.paths import DATA, ONTOLOGIES
from support.server import ServerProcess, free_port, wait_for

pytestmark = pytest.mark.process

EX = "http://example.org/obras#"
SR_ANY = "https://w3id.org/semreg#Any"


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    base = tmp_path_factory.mktemp("cli-server")
    server = ServerProcess(base / "data", "--ontology", str(ONTOLOGIES / "obras.ttl")).start(base / "logs")
    yield server
    server.stop()


@pytest.fixture
def http(srv):
    with srv.client() as c:
        yield c


def ctrl_c_answered() -> None:
    """In the child, before the CLI starts: SIGINT as a terminal gives it. A suite started as a background job
    of a non-interactive shell (`cmd &`) inherits SIGINT ignored, and so would the CLI: Python then never
    raises KeyboardInterrupt, and a Ctrl-C test waits out its timeout."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def semreg(*args: str, url: str | None = None, env: dict[str, str] | None = None, stdin: str | None = None,
           timeout_s: float = 60) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("SEMREG_")}
    environ.update({"SEMREG_URL": url} if url else {})
    environ.update(env or {})
    return subprocess.run([sys.executable, "-m", "semreg", *args], check=False, capture_output=True, text=True,
                          env=environ, input=stdin, timeout=timeout_s)


def ok(result: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert result.returncode == 0, f"exit {result.returncode}\nstdout: {result.stdout}\nstderr: {result.stderr}"
    return result


def js(result: subprocess.CompletedProcess):
    return json.loads(ok(result).stdout)


def uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def lines(text: str) -> list[list[str]]:
    return [line.split() for line in text.strip().splitlines()]


def register(srv, iid: str, service: str, *tags: str, port: int = 9000, extra: tuple[str, ...] = ()):
    args = ["register", "--id", iid, "--service", service, "--address", "127.0.0.1", "--port", str(port),
            "--ttl", "0"]
    for tag in tags:
        args += ["--tag", tag]
    return semreg(*args, *extra, "--json", url=srv.url)


# -- instances ---------------------------------------------------------------------------------------
def test_register_instances_heartbeat_deregister(srv, http):
    iid, service = uid("livros"), uid("svc")
    view = js(semreg("register", "--id", iid, "--service", service, "--address", "127.0.0.1", "--port", "9001",
                     "--tag", "ex:Livro ex:temUmGenero ex:Terror", "--tag", "ex:Romance", "--ttl", "60",
                     "--weight", "3", "--capacity", "10", "--meta", "zone=a", "--meta", "v=1=2",
                     "--check-tcp", f"127.0.0.1:{srv.port}", "--json", url=srv.url))
    assert view["id"] == iid and view["weight"] == 3 and view["capacity"] == 10 and view["ttl"] == 60
    assert view["meta"] == {"zone": "a", "v": "1=2"} and view["check"]["tcp"] == f"127.0.0.1:{srv.port}"
    assert view["tags"][0] == {"s": EX + "Livro", "p": EX + "temUmGenero", "o": EX + "Terror"}
    assert http.get(f"/v1/instances/{iid}").status_code == 200, "a one-shot register leaves the lease behind"

    listed = js(semreg("instances", "--service", service, "--json", url=srv.url))
    assert [i["id"] for i in listed] == [iid] and {"status", "expires_at", "tags", "load"} <= set(listed[0])
    table = ok(semreg("instances", "--service", service, url=srv.url)).stdout
    header, row = lines(table)
    assert header == ["ID", "SERVICE", "ADDRESS", "STATUS", "LOAD", "WEIGHT", "EXPIRES", "TAGS"]
    assert row[:4] == [iid, service, "127.0.0.1:9001", "up"] and "ex:Livro" in row and "(+1)" in row
    one = ok(semreg("instances", iid, url=srv.url)).stdout
    assert "ex:Romance sr:Any sr:Any" in one, "tags shown as CURIEs"
    assert js(semreg("instances", iid, "--json", url=srv.url))["id"] == iid

    beat = js(semreg("heartbeat", iid, "--load", "4", "--status", "draining", "--json", url=srv.url))
    assert set(beat) >= {"id", "status", "expires_at"} and beat["status"] == "draining"
    assert http.get(f"/v1/instances/{iid}").json()["load"] == 4
    assert iid in ok(semreg("heartbeat", iid, url=srv.url)).stdout

    assert js(semreg("deregister", iid, "--json", url=srv.url)) == {"id": iid, "deregistered": True}
    assert http.get(f"/v1/instances/{iid}").status_code == 404


def test_environment_from_the_flag_or_semreg_environment(srv):
    iid, service = uid("staged"), uid("svc")
    q = ["discover", "ex:Obra", "ex:temUmGenero", "ex:Terror", "--service", service, "--json"]
    view = js(semreg("register", "--id", iid, "--service", service, "--address", "127.0.0.1", "--port", "9301",
                     "--tag", "ex:Livro ex:temUmGenero ex:Terror", "--ttl", "0", "--environment", "staging", "--json",
                     url=srv.url))
    assert view["environment"] == "staging"
    staging = {"SEMREG_ENVIRONMENT": "staging"}
    assert [i["id"] for i in js(semreg(*q, url=srv.url, env=staging))["instances"]] == [iid]
    assert js(semreg(*q, url=srv.url))["instances"] == []  # the registry's default environment
    assert [i["id"] for i in js(semreg(*q, "--environment", "*", url=srv.url, env=staging))["instances"]] == [iid]
    assert [i["id"] for i in js(semreg("instances", "--service", service, "--json", url=srv.url, env=staging))] == [iid]
    assert ok(semreg("route", "ex:Obra", "ex:temUmGenero", "ex:Terror", "--service", service, url=srv.url,
                     env=staging)).stdout.strip() == "http://127.0.0.1:9301"
    assert ok(semreg("deregister", iid, url=srv.url)).returncode == 0


@pytest.mark.parametrize("args", [["deregister", "nobody-here"], ["heartbeat", "nobody-here"],
                                  ["instances", "nobody-here"], ["concept", "ex:Nothing"],
                                  ["ontology", "get", "nothing"], ["ontology", "delete", "nothing"]])
def test_not_found_exits_4_with_the_servers_sentence(srv, args):
    result = semreg(*args, url=srv.url)
    assert result.returncode == 4, result.stderr
    assert result.stdout == "" and result.stderr.startswith("semreg: ")
    assert "nobody-here" in result.stderr or "nothing" in result.stderr.lower()


def test_register_keep_alive_heartbeats_until_ctrl_c_then_deregisters(srv, http):
    iid = uid("alive")
    proc = subprocess.Popen([sys.executable, "-m", "semreg", "register", "--id", iid, "--service", "alive",
                             "--address", "127.0.0.1", "--port", "9002", "--ttl", "1", "--tag", "ex:Filme",
                             "--keep-alive", "--url", srv.url], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=ctrl_c_answered)
    try:
        assert proc.stderr.readline() == f"heartbeating every 0.3 s; Ctrl-C deregisters {iid}\n"
        seen = [wait_for(lambda: http.get(f"/v1/instances/{iid}").json().get("expires_at"), what="registration")]
        for _ in range(3):  # renewal after renewal: the heartbeats keep coming
            wait_for(lambda: http.get(f"/v1/instances/{iid}").json()["expires_at"] > seen[-1], what="a heartbeat")
            seen.append(http.get(f"/v1/instances/{iid}").json()["expires_at"])
        assert http.get(f"/v1/instances/{iid}").json()["status"] == "up"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert f"registered {iid}" in out and f"deregistered {iid}" in err
    assert http.get(f"/v1/instances/{iid}").status_code == 404


def test_register_keep_alive_stopped_by_sigterm_deregisters_and_exits_0(srv, http):
    iid = uid("stopped")
    proc = subprocess.Popen([sys.executable, "-m", "semreg", "register", "--id", iid, "--service", "alive",
                             "--address", "127.0.0.1", "--port", "9002", "--ttl", "10", "--tag", "ex:Filme",
                             "--keep-alive", "--url", srv.url], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stderr.readline() == f"heartbeating every 3.3 s; Ctrl-C deregisters {iid}\n"
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert f"deregistered {iid}" in err and http.get(f"/v1/instances/{iid}").status_code == 404


def test_register_needs_a_tag_or_no_tags(srv, http):
    iid = uid("bare")
    base = ["register", "--id", iid, "--service", "bare", "--address", "127.0.0.1", "--port", "9003"]
    refused = semreg(*base, url=srv.url)
    assert refused.returncode == 2 and "--tag" in refused.stderr and "--no-tags" in refused.stderr
    assert http.get(f"/v1/instances/{iid}").status_code == 404
    assert semreg(*base, "--no-tags", "--tag", "ex:Livro", url=srv.url).returncode == 2
    assert js(semreg(*base, "--no-tags", "--ttl", "0", "--json", url=srv.url))["tags"] == []
    ok(semreg("deregister", iid, url=srv.url))


@pytest.mark.parametrize("before", [["--url", "{url}"], ["--url={url}", "--json"], ["--json", "--url", "{url}"]])
def test_global_options_go_before_the_command_too(srv, before):
    args = [a.format(url=srv.url) for a in before]
    dead = f"http://127.0.0.1:{free_port()}"
    result = ok(semreg(*args, "discover", "ex:Obra", url=dead))  # before the command wins over SEMREG_URL
    assert ("--json" in args) == result.stdout.startswith("{")
    nested = ok(semreg(*args, "ontology", "list", url=dead)).stdout
    assert "obras" in nested
    assert ok(semreg("--url", dead, "tags", "--url", srv.url)).returncode == 0, "after the command wins over before"
    assert semreg("--url", dead, "tags").returncode == 3


def test_unknown_terms_are_warned_about_on_stderr(srv):
    iid = uid("typo")
    result = ok(register(srv, iid, "typo", "ex:Livr ex:temUmGenero ex:Terror"))
    assert json.loads(result.stdout)["id"] == iid
    assert result.stderr == (f"semreg: warning: tags[0]: ex:Livr ({EX}Livr) is not a term of any uploaded ontology, "
                             f"so it matches only itself; did you mean ex:Livro?\n")
    found = ok(semreg("discover", "ex:Obar", "ex:temUmGenero", "ex:Terror", url=srv.url))
    assert found.stdout == "no instances match.\n" and "did you mean ex:Obra?" in found.stderr
    assert ok(semreg("discover", "ex:Obra", url=srv.url)).stderr == ""
    ok(semreg("deregister", iid, url=srv.url))


def test_serve_strict_terms_refuses_them(start_server):
    strict = start_server("--strict-terms", "--ontology", str(ONTOLOGIES / "obras.ttl"), data_dir=None)
    result = semreg("register", "--service", "typo", "--address", "127.0.0.1", "--port", "9000", "--tag", "ex:Livr",
                    url=strict.url)
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.startswith("semreg: tags[0]: ex:Livr (") and "(--strict-terms)" in result.stderr
    assert httpx.get(strict.url + "/v1/instances").json() == []


# -- discovery ---------------------------------------------------------------------------------------
def test_discover_takes_min_similarity_and_its_help_names_similar(srv):
    """A near miss (`similar`, asked by --match) has a similarity; --min-similarity is the floor it must reach."""
    service = uid("near")
    ok(register(srv, uid("f"), service, "ex:Filme ex:temUmGenero ex:Terror", port=9105))
    asked = ["discover", "ex:Livro", "ex:temUmGenero", "ex:Terror", "--match", "all,similar", "--service", service,
             "--json"]
    near = js(semreg(*asked, url=srv.url))
    similarity = near["instances"][0]["match"]["similarity"]
    assert near["instances"][0]["match"]["degree"] == "similar" and 0 < similarity < 1
    assert len(js(semreg(*asked, "--min-similarity", str(similarity), url=srv.url))["instances"]) == 1
    assert js(semreg(*asked, "--min-similarity", "0.99", url=srv.url))["instances"] == []
    helped = ok(semreg("discover", "--help")).stdout
    match_help = re.search(r"\n\s+--match MATCH\s+(.*?)\n\s+-", helped, re.S)
    assert match_help and "similar" in match_help.group(1) and "--min-similarity X" in helped
    scored = js(semreg(*asked, "--rank", "score", url=srv.url))  # the learned matchmaker's score ranks
    assert [i["id"] for i in scored["instances"]] == [i["id"] for i in near["instances"]]
    assert 0 <= scored["instances"][0]["match"]["score"] <= 1


def test_discover_table_uses_curies_and_json_is_the_servers(srv):
    service = uid("disc")
    ok(register(srv, uid("l"), service, "ex:Livro ex:temUmGenero ex:Terror", port=9101))
    ok(register(srv, uid("p"), service, "ex:Obra a ex:Pintura", port=9102))
    result = js(semreg("discover", "ex:Obra", "ex:temUmGenero", "ex:Terror", "--service", service, "--json",
                       url=srv.url))
    assert set(result) == {"query", "matches", "truncated", "instances"}
    assert result["query"] == {"s": EX + "Obra", "p": EX + "temUmGenero", "o": EX + "Terror"}
    assert [m["degree"] for m in result["matches"]] == ["narrower"] and len(result["instances"]) == 1
    assert set(result["matches"][0]) >= {"tag", "degree", "distance", "instances"}
    quoted = js(semreg("discover", "ex:Obra ex:temUmGenero ex:Terror", "--service", service, "--json", url=srv.url))
    assert quoted == result, "one quoted pattern is the same as three terms"

    rows = lines(ok(semreg("discover", "ex:Obra", "ex:temUmGenero", "ex:Terror", "--service", service,
                           url=srv.url)).stdout)
    assert rows[0] == ["ID", "SERVICE", "URL", "STATUS", "LOAD", "DEGREE", "DISTANCE", "TAG"]
    assert rows[1][2:] == ["http://127.0.0.1:9101", "up", "0", "narrower", "1", "ex:Livro", "ex:temUmGenero",
                           "ex:Terror"]
    everything = js(semreg("discover", "ex:Obra", "--match", "all", "--service", service, "--json", url=srv.url))
    assert len(everything["instances"]) == 2
    assert "no instances match" in ok(semreg("discover", "ex:Filme", "--service", service, url=srv.url)).stdout


def test_route_prints_the_url(srv):
    service = uid("route")
    iid = uid("r")
    ok(register(srv, iid, service, "ex:Filme ex:temUmGenero ex:Terror", port=9201))
    out = ok(semreg("route", "ex:Obra", "ex:temUmGenero", "ex:Terror", "--service", service, "--path", "/films",
                    url=srv.url)).stdout
    assert out == "http://127.0.0.1:9201/films\n"
    assert js(semreg("route", "ex:Obra", "--service", service, "--json", url=srv.url)) == \
        {"url": "http://127.0.0.1:9201", "instance": iid}
    none = semreg("route", "ex:Obra", "--service", uid("nobody"), url=srv.url)
    assert none.returncode == 1 and none.stderr.startswith("semreg: ") and none.stdout == ""


def test_watch_ends_with_130_on_ctrl_c(srv):
    proc = subprocess.Popen([sys.executable, "-m", "semreg", "watch", "ex:Obra", "--service", uid("nobody"), "--json",
                             "--wait", "10", "--url", srv.url], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=ctrl_c_answered)
    try:
        assert json.loads(proc.stdout.readline())["instances"] == []  # watching, blocked on the next change
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130 and "Traceback" not in err, err


def test_watch_prints_each_change(srv):
    service = uid("watch")
    proc = subprocess.Popen([sys.executable, "-m", "semreg", "watch", "ex:Obra", "--service", service, "--json",
                             "--count", "2", "--wait", "10", "--url", srv.url], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        first = json.loads(proc.stdout.readline())
        assert first["instances"] == []
        iid = uid("w")
        ok(register(srv, iid, service, "ex:Livro", port=9301))
        second = json.loads(proc.stdout.readline())
        assert [i["id"] for i in second["instances"]] == [iid]
        proc.wait(20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, proc.stderr.read()
    table = ok(semreg("watch", "ex:Obra", "--service", service, "--count", "1", url=srv.url)).stdout
    assert table.startswith("# ") and "1 instance(s)" in table and iid in table


def test_tags_expand_and_concept(srv):
    service = uid("tags")
    ok(register(srv, uid("t"), service, "ex:Romance ex:temGeneroPrincipal ex:Drama", port=9401))
    tags = js(semreg("tags", "--json", url=srv.url))["tags"]
    mine = [t for t in tags if t["o"] == EX + "Drama"]
    assert mine and set(mine[0]) == {"s", "p", "o", "instances"}
    table = lines(ok(semreg("tags", url=srv.url)).stdout)
    assert table[0] == ["SUBJECT", "PREDICATE", "OBJECT", "INSTANCES"]
    assert ["ex:Romance", "ex:temGeneroPrincipal", "ex:Drama"] in [r[:3] for r in table]

    expanded = js(semreg("expand", "ex:Obra", "ex:temUmGenero", "--json", url=srv.url))
    assert {"query", "components", "tags"} <= set(expanded)
    assert EX + "Romance" in [c["iri"] for c in expanded["components"]["s"]]
    text = ok(semreg("expand", "ex:Obra", "ex:temUmGenero", url=srv.url)).stdout
    assert "ex:Romance" in text and "ex:temGeneroPrincipal" in text and "REGISTERED TAG" in text

    concept = js(semreg("concept", "ex:Livro", "--json", url=srv.url))
    assert concept["iri"] == EX + "Livro" and concept["parents"] == [EX + "Obra"]
    assert "ex:Obra" in ok(semreg("concept", "ex:Livro", url=srv.url)).stdout


# -- ontologies and SPARQL ---------------------------------------------------------------------------
def test_ontology_put_list_get_delete(srv, tmp_path):
    path = tmp_path / "cores.ttl"
    body = ["@prefix co: <http://example.org/cores#> .", "@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> ."]
    body += [f"co:Tom{n} rdfs:subClassOf co:Cor ." for n in range(5000)]
    path.write_text("\n".join(body) + "\n")
    put = ok(semreg("ontology", "put", "cores", str(path), "--progress", url=srv.url))
    assert put.stdout.startswith("uploaded cores: 5000 triples")
    assert "cores" in put.stderr, "the progress bar goes to stderr"
    listed = js(semreg("ontology", "list", "--json", url=srv.url))
    cores = next(o for o in listed if o["name"] == "cores")
    assert {"name", "triples", "inferred", "uploaded_at"} <= set(cores)
    rows = lines(ok(semreg("ontology", "list", url=srv.url)).stdout)
    assert rows[0][:3] == ["NAME", "TRIPLES", "INFERRED"] and ["cores", "5000"] in [r[:2] for r in rows]
    # INFERRED is what the upload added, as the upload said, not the size of the closure of all of them
    added, total = re.search(r"(\d+) inferred by it \(of (\d+) in the closure\)", put.stdout).groups()
    assert cores["inferred"] == int(added) < int(total)
    assert [["cores", "5000", added]] == [r[:3] for r in rows if r[0] == "cores"]
    assert "Tom4999" in ok(semreg("ontology", "get", "cores", url=srv.url)).stdout
    nt = ok(semreg("ontology", "get", "cores", "--format", "ntriples", url=srv.url)).stdout
    assert "<http://example.org/cores#Tom7> <http://www.w3.org/2000/01/rdf-schema#subClassOf>" in nt
    out = tmp_path / "copy.jsonld"
    ok(semreg("ontology", "get", "cores", "--json", "-o", str(out), url=srv.url))
    assert json.loads(out.read_text())
    put_json = js(semreg("ontology", "put", "cores", str(path), "--json", url=srv.url))
    assert put_json["name"] == "cores" and put_json["triples"] == 5000
    stdin_put = js(semreg("ontology", "put", "tiny", "-", "--json", url=srv.url,
                          stdin="<http://x.org/a> <http://www.w3.org/2000/01/rdf-schema#subClassOf> <http://x.org/b> ."))
    assert stdin_put["triples"] == 1
    assert ok(semreg("ontology", "delete", "cores", url=srv.url)).stdout == "deleted cores\n"
    assert js(semreg("ontology", "delete", "tiny", "--json", url=srv.url)) == {"name": "tiny", "deleted": True}
    assert semreg("ontology", "delete", "cores", url=srv.url).returncode == 4


def test_an_n3_file_is_sent_as_text_n3_and_read_as_turtle(srv):
    foaf = DATA / "ontologies" / "foaf-0.99.n3"
    put = js(semreg("ontology", "put", "foaf-n3", str(foaf), "--json", url=srv.url))
    assert put["triples"] == 631 and put["media_type"] == "text/n3"
    assert "http://xmlns.com/foaf/0.1/" in ok(semreg("ontology", "get", "foaf-n3", url=srv.url)).stdout
    listed = {o["name"]: o for o in js(semreg("ontology", "list", "--json", url=srv.url))}
    assert listed["foaf-n3"]["media_type"] == "text/n3"
    assert ok(semreg("ontology", "delete", "foaf-n3", url=srv.url)).stdout == "deleted foaf-n3\n"


def test_ontology_put_refusals(srv, tmp_path):
    bad = tmp_path / "bad.ttl"
    bad.write_text("@prefix : <http://x.org/> .\n:a :b .\n")
    result = semreg("ontology", "put", "bad", str(bad), url=srv.url)
    assert result.returncode == 1 and result.stderr.startswith("semreg: ") and "line" in result.stderr.lower()
    assert semreg("ontology", "put", "x", str(tmp_path / "missing.ttl"), url=srv.url).returncode == 2
    notes = tmp_path / "notes.txt"
    notes.write_text("hello")
    assert semreg("ontology", "put", "x", str(notes), url=srv.url).returncode == 2


def test_sparql_table_json_and_formats(srv):
    service = uid("sparql")
    iid = uid("s")
    ok(register(srv, iid, service, "ex:Pintura", port=9501))
    query = (f"PREFIX sr: <https://w3id.org/semreg#> SELECT ?id ?tagS WHERE {{ ?i a sr:Instance ; "
             f"sr:service '{service}' ; sr:id ?id ; sr:tag ?t . ?t <http://www.w3.org/1999/02/22-rdf-syntax-ns#subject> ?tagS }}")
    result = ok(semreg("sparql", query, url=srv.url))
    assert lines(result.stdout) == [["id", "tagS"], [iid, "ex:Pintura"]]
    assert "(1 row)" in result.stderr
    data = js(semreg("sparql", query, "--json", url=srv.url))
    assert data["head"]["vars"] == ["id", "tagS"]
    assert data["results"]["bindings"][0]["tagS"] == {"type": "uri", "value": EX + "Pintura"}
    csv = ok(semreg("sparql", query, "--format", "csv", url=srv.url)).stdout
    assert csv.splitlines()[0].strip() == "id,tagS" and iid in csv
    tsv = ok(semreg("sparql", query, "--format", "tsv", url=srv.url)).stdout
    assert tsv.splitlines()[0].strip() == "?id\t?tagS"
    xml = ok(semreg("sparql", query, "--format", "xml", url=srv.url)).stdout
    assert "<sparql" in xml and iid in xml
    assert ok(semreg("sparql", "ASK { ?s ?p ?o }", url=srv.url)).stdout == "true\n"
    graph = ok(semreg("sparql", "CONSTRUCT { ?s ?p ?o } WHERE { ?s ?p ?o . FILTER(?s = <http://example.org/obras#Livro>) }",
                      url=srv.url)).stdout
    assert "Livro" in graph and "subClassOf" in graph
    from_stdin = ok(semreg("sparql", "-", "--format", "csv", url=srv.url, stdin="SELECT ?x WHERE { VALUES ?x { 1 } }"))
    assert from_stdin.stdout.split() == ["x", "1"]
    bad = semreg("sparql", "SELEKT ?x", url=srv.url)
    assert bad.returncode == 1 and bad.stderr.startswith("semreg: ")


def test_ontology_put_reads_dev_null_and_pipes_as_the_files_they_are(srv, tmp_path):
    empty = semreg("ontology", "put", "empty", "/dev/null", url=srv.url)
    assert empty.returncode == 1 and empty.stderr == "semreg: the ontology is empty; send at least one triple.\n"
    piped = js(semreg("ontology", "put", "piped", "/dev/stdin", "--json", url=srv.url,
                      stdin="<http://x.org/a> <http://www.w3.org/2000/01/rdf-schema#subClassOf> <http://x.org/b> ."))
    assert piped["triples"] == 1 and piped["media_type"] == "text/turtle"
    ok(semreg("ontology", "delete", "piped", url=srv.url))
    missing = semreg("ontology", "put", "x", str(tmp_path / "none.ttl"), url=srv.url)
    assert missing.returncode == 2 and missing.stderr.endswith("none.ttl: no such file.\n")
    folder = semreg("ontology", "put", "x", str(tmp_path), url=srv.url)
    assert folder.returncode == 2 and "is a directory" in folder.stderr


@pytest.mark.slow
def test_concept_lists_are_cut_short_unless_all_and_dbpedia_terms_are_curies(start_server):
    server = start_server("--ontology", str(DATA / "ontologies" / "dbpedia-ontology-2026.08.20.owl"), data_dir=None)
    full = js(semreg("concept", "dbo:Person", "--json", url=server.url))
    assert len(full["descendants"]) > 100
    rows = {line.split()[0]: line for line in ok(semreg("concept", "dbo:Person", url=server.url)).stdout.splitlines()}
    shown = rows["descendants"].split(None, 1)[1]
    assert shown.endswith(f", ... and {len(full['descendants']) - 10} more") and shown.count(", ") == 10
    assert shown.startswith("dbo:") and "http://dbpedia.org/ontology/" not in shown, "dbo: is known undeclared"
    every = ok(semreg("concept", "dbo:Person", "--all", url=server.url)).stdout
    listed = next(line for line in every.splitlines() if line.startswith("descendants")).split(None, 1)[1]
    assert len(listed.split(", ")) == len(full["descendants"]) and "http://" not in listed


# -- exit codes, environment, help -------------------------------------------------------------------
def test_exit_codes(srv):
    dead = f"http://127.0.0.1:{free_port()}"
    unreachable = semreg("instances", url=dead)
    assert unreachable.returncode == 3 and "no registry answered" in unreachable.stderr
    assert semreg("discover", "ex:Obra", "--url", dead).returncode == 3
    bad_term = semreg("discover", "zz:Foo", url=srv.url)
    assert bad_term.returncode == 1 and "zz" in bad_term.stderr and bad_term.stdout == ""
    for args in (["discover"], ["discover", "a", "b", "c", "d"], ["register", "--service", "x"],
                 ["register", "--service", "x", "--address", "h", "--port", "1", "--meta", "novalue"],
                 ["instances", "--bogus"], ["sparql", "@/no/such/file"], ["ontology"]):
        result = semreg(*args, url=srv.url)
        assert result.returncode == 2, (args, result.stderr)
        assert result.stderr


def test_url_list_env_and_token(start_server, tmp_path):
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"tokens": [{"name": "ops", "token": "t-ops-0123456789ab", "scopes": ["admin"]}]}))
    server = start_server("--tokens", str(tokens))
    dead = f"http://127.0.0.1:{free_port()}"
    both = f"{dead},{server.url}"
    assert js(semreg("instances", "--json", url=both, env={"SEMREG_TOKEN": "t-ops-0123456789ab"})) == []
    assert js(semreg("instances", "--json", "--token", "t-ops-0123456789ab", "--url", both)) == []
    refused = semreg("instances", url=server.url)
    assert refused.returncode == 1 and refused.stderr.startswith("semreg: ")


def test_help_documents_the_exit_codes():
    for command in (["discover"], ["register"], ["ontology", "put"], ["sparql"]):
        text = ok(semreg(*command, "--help")).stdout
        assert "exit codes:" in text and "3  no registry URL could be reached" in text and "SEMREG_URL" in text


def test_default_url_comes_from_the_environment(srv):
    assert semreg("tags", "--json", env={"SEMREG_URL": srv.url}).returncode == 0
    result = semreg("tags", env={"SEMREG_URL": f"http://127.0.0.1:{free_port()}"})
    assert result.returncode == 3
    assert httpx.get(srv.url + "/healthz").status_code == 200
