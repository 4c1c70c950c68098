"""node-consul (npm's `consul`, 2.x), unchanged, watching a saved query's name on `semreg serve --consul-listen`:
its `watch` of `health.service` starts at `index=0&wait=60s`, ends on an answer without `X-Consul-Index`, takes an
index of 0 as an error and a lower one as a reset, so each answer it sees here is the listener's blocking read as
Consul answers it. Each removal of an instance the query finds must reach the watch within 5 s.

The client is installed from the lock beside this file (`tests/consul/node/`) the first time it is needed, into
that folder's `node_modules` (not committed). What the watch sees is read from its output with a deadline, never a
sleep."""
from __future__ import annotations

import json
import queue
import subprocess
import threading
from pathlib import Path

import httpx
import pytest
from support.paths import ONTOLOGIES
from support.server import free_port

pytestmark = [pytest.mark.process, pytest.mark.needs_tool("node", "nodejs"), pytest.mark.needs_tool("npm", "npm")]

CLIENT = Path(__file__).parent / "node"
SEEN_WITHIN_S = 5


@pytest.fixture(scope="module")
def node_consul() -> Path:
    if not (CLIENT / "node_modules" / "consul" / "package.json").is_file():
        done = subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=CLIENT, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, f"npm ci in {CLIENT} failed:\n{done.stderr[-2000:]}"
    return CLIENT / "watch.js"


def lines_of(stream) -> queue.Queue:
    """Each line the watch prints, as it prints it."""
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in stream], daemon=True).start()
    return lines


def test_node_consul_s_watch_of_a_saved_query_s_name_sees_each_removal_within_5_s(start_server, node_consul):
    port = free_port()
    srv = start_server("--consul-listen", f"127.0.0.1:{port}")
    with httpx.Client(base_url=srv.url, timeout=30) as api:
        assert api.put("/v1/ontologies/obras", content=(ONTOLOGIES / "obras.ttl").read_bytes(),
                       headers={"Content-Type": "text/turtle"}).status_code == 201
        assert api.put("/v1/queries/obras-de-terror", json={"s": "ex:Obra", "p": "ex:temUmGenero",
                                                            "o": "ex:Terror"}).status_code in (200, 201)
        ids = [f"livro-{n}" for n in range(4)] + [f"filme-{n}" for n in range(3)]
        for n, sid in enumerate(ids):
            kind = "Livro" if sid.startswith("livro") else "Filme"
            assert api.put(f"/v1/instances/{sid}", json={
                "service": kind.lower() + "s", "address": "127.0.0.1", "port": 9000 + n,
                "tags": [{"s": f"ex:{kind}", "p": "ex:temUmGenero", "o": "ex:Terror"}]}).status_code in (200, 201)
        # an instance the query does not find: its removal changes nothing the watch reads
        assert api.put("/v1/instances/pintura-0", json={"service": "pinturas", "address": "127.0.0.1", "port": 9100,
                                                         "tags": [{"s": "ex:Pintura", "p": "ex:temUmGenero",
                                                                   "o": "ex:Drama"}]}).status_code in (200, 201)
        watch = subprocess.Popen(["node", str(node_consul), "127.0.0.1", str(port), "obras-de-terror"],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            seen, errors = lines_of(watch.stdout), lines_of(watch.stderr)

            def next_answer() -> dict:
                try:
                    return json.loads(seen.get(timeout=SEEN_WITHIN_S))
                except queue.Empty:
                    said = []
                    while not errors.empty():
                        said.append(errors.get())
                    pytest.fail(f"the watch saw nothing within {SEEN_WITHIN_S} s; it said: {''.join(said)}")
            first = next_answer()
            assert first["ids"] == sorted(ids) and int(first["index"]) > 0
            left, last_index = sorted(ids), int(first["index"])
            assert api.delete("/v1/instances/pintura-0").status_code == 204
            for sid in ids:
                assert api.delete(f"/v1/instances/{sid}").status_code == 204
                left.remove(sid)
                answer = next_answer()  # the unrelated removal before it woke nothing: this is the next answer
                assert answer["ids"] == left, f"after removing {sid}"
                assert int(answer["index"]) > last_index
                last_index = int(answer["index"])
            assert errors.empty(), errors.get()
        finally:
            watch.stdin.close()
            watch.wait(10)
