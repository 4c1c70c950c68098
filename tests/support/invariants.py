"""What must hold on every node of a ring after faults and a heal, and the evidence when it does not.

`unhealed()` says what still keeps a ring from being whole: a node not running, not ready or degraded,
a member not alive in some node's view, two checksums. `read()` takes one node's answers: the listing
(`/v1/instances`) with each instance's status (every node must list the same), a discovery every
registered tag matches through a superclass, and the ids SPARQL sees, each sent again after a 503's
Retry-After for up to `PATIENCE_S`, as a client would (a node catching up after a fault sheds reads while
its loop is behind; one still shedding past that fails the reading).
`violations()` holds them against a `Ledger`'s strict sets; `evidence()` shows, for a few ids of each
violation, what every node's `/internal/v1/inventory` says, who owns them, and what the writers saw.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from semreg.bench.localcluster import ClusterNode, LocalCluster
from semreg.cluster.ring import Ring
from support.churn import Ledger

# body(n)'s first tag is `ex:<Livro|Filme|Pintura|Romance> ex:temUmGenero ex:<genre>`: narrower than this
DISCOVERY = {"s": "ex:Obra", "p": "ex:temUmGenero", "status": "any", "tags": "false"}
SPARQL_IDS = "PREFIX sr: <https://w3id.org/semreg#>\nSELECT ?id WHERE { ?i a sr:Instance ; sr:id ?id }"
SPARQL_COUNT = "PREFIX sr: <https://w3id.org/semreg#>\nSELECT (COUNT(?i) AS ?n) WHERE { ?i a sr:Instance }"
SAVED_QUERY = "obras"  # DISCOVERY saved, which a node's Consul listener answers as a service name
# the status a listing says → (the Consul status of the instance's own check, whether it has a maintenance check)
CONSUL_STATUS = {"up": ("passing", False), "draining": ("passing", True), "blocked": ("warning", False),
                 "critical": ("critical", False)}


def unhealed(cluster: LocalCluster) -> list[str]:
    """Empty once every node runs, is ready (not degraded) and sees every node alive on one checksum."""
    problems, names = [], sorted(n.name for n in cluster.nodes)
    for node in cluster.nodes:
        if not node.running:
            problems.append(f"{node.name} is not running")
            continue
        try:
            r = httpx.get(node.url + "/readyz", timeout=2.0)
            if r.status_code != 200 or r.json().get("status") != "ready":
                problems.append(f"{node.name} /readyz {r.status_code} {r.text[:120]}")
        except (httpx.HTTPError, ValueError) as exc:
            problems.append(f"{node.name} /readyz {type(exc).__name__}")
    views = cluster.views(cluster.nodes)
    for name, view in sorted(views.items()):
        members = {m["id"]: m["status"] for m in view["members"]}
        if sorted(i for i, s in members.items() if s == "alive") != names or view.get("degraded"):
            problems.append(f"{name} sees {members} degraded={view.get('degraded')}")
    if len({v["checksum"] for v in views.values()}) > 1:
        problems.append("checksums " + ", ".join(f"{n}={v['checksum']}" for n, v in sorted(views.items())))
    return problems


def heal_wait(cluster: LocalCluster, budget_s: float) -> tuple[float, list[str]]:
    """Seconds until the ring was whole (bounded by `budget_s`), and what was still wrong at the end."""
    started = time.monotonic()
    problems = unhealed(cluster)
    while problems and time.monotonic() - started < budget_s:
        time.sleep(0.25)
        problems = unhealed(cluster)
    return time.monotonic() - started, problems


@dataclass
class Reading:
    listed: list[str] = field(default_factory=list)
    statuses: dict[str, str] = field(default_factory=dict)  # id → the status the listing says
    discovered: list[str] = field(default_factory=list)
    sparql: list[str] = field(default_factory=list)
    sparql_count: int = -1
    notes: list[str] = field(default_factory=list)  # partial answers, read errors
    # what the node's own shard held as the listing was read: live copies (id → revision), and the removals
    # its answers carried (id → revision), for the evidence
    shard: dict[str, int] = field(default_factory=dict)
    removed: dict[str, int] = field(default_factory=dict)
    # through the node's Consul listener, when it has one: every service's instances with (status, maintenance),
    # the saved query's name's instances, and what the public API's discovery of that saved query found
    consul: dict[str, tuple[str, bool]] | None = None
    consul_by_meaning: list[str] = field(default_factory=list)
    saved_discovered: list[str] = field(default_factory=list)


PATIENCE_S = 15.0  # how long a read refused with 503 and Retry-After (a node shedding) is sent again


def patient(send: Any) -> httpx.Response:
    """`send()`'s answer, sent again after its Retry-After while it is a 503 that says when, as a client
    would: a node catching up after a fault sheds reads while its event loop is behind. Past `PATIENCE_S`
    the 503 stands (and fails the reading)."""
    deadline = time.monotonic() + PATIENCE_S
    while True:
        r = send()
        wait = r.headers.get("Retry-After", "")
        if r.status_code != 503 or not wait.isdigit() or time.monotonic() + int(wait) > deadline:
            return r
        time.sleep(int(wait))


def read(node: ClusterNode) -> Reading:
    out = Reading()
    try:
        with node.client(timeout=30.0) as c:
            r = patient(lambda: c.get("/v1/instances", params={"tags": "false"}))
            out.listed = [i["id"] for i in r.json()] if r.status_code == 200 else []
            out.statuses = {i["id"]: i["status"] for i in r.json()} if r.status_code == 200 else {}
            own = httpx.get(node.cluster_url + "/internal/v1/instances", params={"tags": "false"}, timeout=30.0,
                            headers={"X-Semreg-Cluster": secret(node)})
            if own.status_code == 200:
                out.shard = {m["view"]["id"]: m["revision"] for m in own.json()["members"]}
                out.removed = own.json().get("removed", {})
            if r.status_code != 200 or "X-Semreg-Partial" in r.headers:
                out.notes.append(f"/v1/instances {r.status_code} partial={r.headers.get('X-Semreg-Partial')}")
            r = patient(lambda: c.get("/v1/discover", params=DISCOVERY))
            found = r.json() if r.status_code == 200 else {}
            out.discovered = [i["id"] for i in found.get("instances", [])]
            if r.status_code != 200 or found.get("partial"):
                out.notes.append(f"/v1/discover {r.status_code} missing={found.get('missing')}")
            out.sparql = [b["id"]["value"] for b in sparql(c, SPARQL_IDS)]
            out.sparql_count = int(sparql(c, SPARQL_COUNT)[0]["n"]["value"])
            if node.consul_url is not None:
                read_consul(node.consul_url, c, out)
    except (httpx.HTTPError, ValueError, KeyError, IndexError) as exc:
        out.notes.append(f"read failed: {type(exc).__name__}: {exc}")
    return out


def read_consul(url: str, public: httpx.Client, out: Reading) -> None:
    """The node's answers through its Consul listener, as a Consul client reads them: each service of the
    catalog's list with its instances' checks, and the saved query's name; and the saved query's own discovery
    on the public API, which that name must answer alike."""
    with httpx.Client(base_url=url, timeout=30.0) as consul:
        names = patient(lambda: consul.get("/v1/catalog/services")).json()
        out.consul = {}
        for name in names:
            for entry in patient(lambda name=name: consul.get(f"/v1/health/service/{name}")).json():
                sid = entry["Service"]["ID"]
                own = next(ch["Status"] for ch in entry["Checks"] if ch["CheckID"] == f"service:{sid}")
                out.consul[sid] = (own, any(ch["CheckID"].startswith("_service_maintenance:") for ch in entry["Checks"]))
        r = patient(lambda: consul.get(f"/v1/health/service/{SAVED_QUERY}"))
        out.consul_by_meaning = [e["Service"]["ID"] for e in r.json()]
    r = patient(lambda: public.get(f"/v1/queries/{SAVED_QUERY}/discover", params={"tags": "false"}))
    out.saved_discovered = [i["id"] for i in r.json().get("instances", [])] if r.status_code == 200 else []
    if r.status_code != 200 or r.json().get("partial"):
        out.notes.append(f"/v1/queries/{SAVED_QUERY}/discover {r.status_code}")


def sparql(client: httpx.Client, query: str) -> list[dict[str, Any]]:
    r = patient(lambda: client.post("/sparql", content=query.encode(),
                                    headers={"Content-Type": "application/sparql-query",
                                             "Accept": "application/sparql-results+json"}))
    r.raise_for_status()
    return r.json()["results"]["bindings"]


def violations(ledger: Ledger, readings: dict[str, Reading]) -> dict[str, dict[str, list[str]]]:
    """{invariant: {node: ids (or notes) that break it}}; empty when everything holds."""
    sets = ledger.sets()
    present, removed = sets["present"], sets["removed"]
    everywhere = set().union(*(set(r.listed) for r in readings.values())) if readings else set()
    agreed: dict[str, set[str]] = {}  # id → every status the nodes' listings say
    for r in readings.values():
        for iid, status in r.statuses.items():
            agreed.setdefault(iid, set()).add(status)
    out: dict[str, dict[str, list[str]]] = {}

    def bad(invariant: str, node: str, ids: set[str] | list[str]) -> None:
        if ids:
            out.setdefault(invariant, {})[node] = sorted(ids)

    for name, r in readings.items():
        listed, found, seen = set(r.listed), set(r.discovered), set(r.sparql)
        bad("acknowledged registration not listed", name, present - listed)
        bad("acknowledged registration not discovered", name, present - found)
        bad("acknowledged registration not in SPARQL", name, present - seen)
        bad("acknowledged removal listed", name, removed & listed)
        bad("acknowledged removal discovered", name, removed & found)
        bad("acknowledged removal counted by SPARQL", name, removed & seen)
        bad("listed by another node, not by this one", name, everywhere - listed)
        bad("listed twice", name, {i for i in r.listed if r.listed.count(i) > 1} if len(listed) < len(r.listed) else set())
        bad("discovery and listing differ on the node", name, listed ^ found)
        bad("SPARQL and listing differ on the node", name, listed ^ seen)
        if r.sparql_count != len(listed):
            bad("SPARQL count is not the number listed", name, [f"COUNT {r.sparql_count}, listed {len(listed)}"])
        if r.consul is not None:
            bad("Consul's services and the listing differ on the node", name, set(r.consul) ^ listed)
            bad("Consul's checks do not say the listed status", name,
                {i for i, said in r.consul.items() if i in r.statuses and CONSUL_STATUS.get(r.statuses[i]) != said})
            bad("the saved query's name and its discovery differ on the node", name,
                set(r.consul_by_meaning) ^ set(r.saved_discovered))
        bad("acknowledged drain not listed draining", name,
            {i for i in sets["drained"] if i in r.statuses and r.statuses[i] != "draining"})
        bad("instance never drained not listed up", name, {i for i in sets["up"] if i in r.statuses and r.statuses[i] != "up"})
        bad("nodes list different statuses", name,
            [f"{iid} {r.statuses[iid]} (elsewhere {sorted(agreed[iid] - {r.statuses[iid]})})"
             for iid in r.statuses if len(agreed[iid]) > 1])
        bad("partial answers or read errors", name, r.notes)
    return out


def summary(found: dict[str, dict[str, list[str]]]) -> list[str]:
    lines = []
    for invariant, per_node in found.items():
        ids = set().union(*map(set, per_node.values()))
        where = ", ".join(f"{n}: {len(v)}" for n, v in sorted(per_node.items()))
        lines.append(f"{invariant}: {len(ids)} distinct ({where}), e.g. {sorted(ids)[:4]}")
    return lines


def evidence(cluster: LocalCluster, ledger: Ledger, found: dict[str, dict[str, list[str]]],
             readings: dict[str, Reading], per_invariant: int = 3) -> list[str]:
    """For a few ids of each violation (and of each unexpected answer): the writers' events, the owners on
    the final ring, which nodes list it, and every node's inventory revision (negative: a tombstone; '-':
    nothing held)."""
    sample = sorted({i for per_node in found.values() for ids in per_node.values()
                     for i in ids[:per_invariant] if i in ledger.events}
                    | {iid for iid, _, _ in ledger.bad[:per_invariant]})[:5 * per_invariant]
    if not sample:
        return []
    views = cluster.views(cluster.nodes)
    members = sorted({m["id"] for v in views.values() for m in v["members"] if m["status"] in ("alive", "suspect")})
    ring, held = Ring(members or [n.name for n in cluster.nodes]), {}
    for node in cluster.nodes:
        held[node.name] = inventory(node, sample)
    lines = []
    for iid in sample:
        lines.append(f"{iid}: owners {ring.owners(iid, 3)}; listed by "
                     f"{[n for n, r in sorted(readings.items()) if iid in r.listed]}; inventory "
                     f"{ {n: h.get(iid, '-') if isinstance(h, dict) else h for n, h in held.items()} }")
        live = {n: r.shard[iid] for n, r in sorted(readings.items()) if iid in r.shard}
        carried = {n: r.removed[iid] for n, r in sorted(readings.items()) if iid in r.removed}
        lines.append(f"    as it was read: live copies {live}, removals carried {carried}")
        lines += [f"    {e}" for e in ledger.events[iid]]
    return lines


def stale_copies(cluster: LocalCluster, removed: list[str]) -> int:
    """Live copies of these (removed) instances held anywhere: what reads hide and anti-entropy removes."""
    found = 0
    for node in cluster.nodes:
        held = inventory(node, removed)
        found += sum(1 for rev in held.values() if rev > 0) if isinstance(held, dict) else 0
    return found


def stale_copies_gone(cluster: LocalCluster, removed: list[str], budget_s: float) -> tuple[int, float | None]:
    """The live copies of removed instances held when asked, and the seconds until none was left (None: some
    were still there after `budget_s`)."""
    started = time.monotonic()
    first = left = stale_copies(cluster, removed)
    while left and time.monotonic() - started < budget_s:
        time.sleep(0.2)
        left = stale_copies(cluster, removed)
    return first, None if left else time.monotonic() - started


def secret(node: ClusterNode) -> str:
    return (node.data_dir.parent.parent / "cluster.secret").read_text().strip()


def inventory(node: ClusterNode, ids: list[str]) -> dict[str, int] | str:
    try:
        r = httpx.post(node.cluster_url + "/internal/v1/inventory", json={"ids": ids}, timeout=10.0,
                       headers={"X-Semreg-Cluster": secret(node)})
        return r.json()["inventory"] if r.status_code == 200 else f"HTTP {r.status_code}"
    except (httpx.HTTPError, ValueError, KeyError) as exc:
        return type(exc).__name__


def error_lines(node: ClusterNode, last: int = 6) -> list[str]:
    """The last errors of a node's log, and its last warnings but for the etcd client's retries."""
    lines = node.log().splitlines()
    errors = [line[:400] for line in lines if any(w in line for w in ('"level":"error"', '"level":"critical"', "Traceback"))]
    warnings = [line[:300] for line in lines if '"level":"warning"' in line and '"logger":"semreg.kv"' not in line]
    return ([f"{node.name}: {len(errors)} error lines, {len(warnings)} warnings (etcd retries aside)"]
            + [f"    {line}" for line in errors[-last:]] + [f"    {line}" for line in warnings[-last:]])
