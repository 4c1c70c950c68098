"""Another node's shard, over its internal API: the `semreg.registry.shard.Shard` interface by HTTP
(`semreg.http.internal`), and what the ring asks of the member besides (its change log, its ontologies).

Every request carries the cluster secret. A request that gets no answer (refused, reset, past its
timeout) raises `ShardUnavailable`, which the cluster layer turns into trying another owner, or into a
partial answer; an answer with an error status is that error (a 404 is `NotFound`, as locally).

A write (`put_records`, `delete_record`) carries this node's view: the etcd revision of its member list
and its ring's checksum. An owner whose view is newer, with another ring, refuses it with 409: that is
`StaleRing`, and this node is asked to read the member list again (`on_stale`).
"""
from __future__ import annotations

import ssl
from collections.abc import Callable, Collection, Iterable
from typing import Any, TypedDict

import orjson

from semreg.cluster import wire
from semreg.cluster.peerhttp import PeerConnections, Unreachable
from semreg.errors import NotFound, SemregError, Unavailable
from semreg.http1.client import Head
from semreg.rdf.terms import Tag
from semreg.registry import discovery
from semreg.registry.catalogue import Match
from semreg.registry.digests import Arcs, Digest
from semreg.registry.environment_counts import Tally
from semreg.registry.instances import Registration
from semreg.registry.questions import Question
from semreg.registry.selector import Selector
from semreg.registry.shard import Held, Record, Removed, Shard, ShardUnavailable, StaleRing, State

SECRET_HEADER = "X-Semreg-Cluster"
READ_TIMEOUT_S = 5.0
WRITE_TIMEOUT_S = 10.0


class ChangesPage(TypedDict):
    """A member's answer to `GET /changes`: its log's epoch, the cursor of the last change given, whether the
    follower must start over (`semreg.registry.changelog`), and the changes (`wire.logged_change_bytes`)."""

    epoch: int
    cursor: int
    reset: bool
    changes: list[list[Any]]


class RemoteShard(Shard):
    """The shard of member `member_id`, reached at `address`."""

    def __init__(self, member_id: str, address: str, secret: str, timeout_s: float = READ_TIMEOUT_S, *,
                 view: Callable[[], tuple[int, int]] | None = None, on_stale: Callable[[], None] | None = None,
                 tls: ssl.SSLContext | None = None) -> None:
        """`view`: this node's (member list revision, ring checksum), sent with every write; `on_stale`: told
        when the member refused a write because this node's ring is stale."""
        self.member_id = member_id
        self.address = address.rstrip("/")
        self.timeout_s = timeout_s
        self.view = view
        self.on_stale = on_stale
        self.http = PeerConnections(self.address, {SECRET_HEADER: secret, "Content-Type": "application/json"},
                                    prefix="/internal/v1", tls=tls)

    async def close(self) -> None:
        await self.http.aclose()

    async def raw(self, method: str, path: str, body: Any = None, params: dict[str, Any] | None = None,
                  timeout_s: float | None = None) -> tuple[Head, bytes]:
        """The response to one request; an error status is raised as the error it is (404 `NotFound`,
        5xx `ShardUnavailable`, other 4xx `SemregError` with that status)."""
        try:
            head, content = await self.http.request(method, path, orjson.dumps(body) if body is not None else None,
                                                    params, timeout_s or self.timeout_s)
        except Unreachable as exc:
            raise ShardUnavailable(self.member_id, str(exc)) from exc
        if head.status == 404:
            removed = _removed(content)
            if removed is not None:
                raise Removed(_error(head.status, content), removed)
            raise NotFound(_error(head.status, content))
        if head.status >= 500:
            raise ShardUnavailable(self.member_id, f"HTTP {head.status}: {_error(head.status, content)}")
        if head.status >= 400:
            error = SemregError(_error(head.status, content))
            error.status = head.status
            raise error
        return head, content

    async def call(self, method: str, path: str, body: Any = None, params: dict[str, Any] | None = None,
                   timeout_s: float | None = None) -> Any:
        """A JSON request and its JSON answer (None for an empty one)."""
        _, content = await self.raw(method, path, body, params, timeout_s)
        return orjson.loads(content) if content else None

    # -- writes ------------------------------------------------------------------------------------
    async def put_records(self, items: list[tuple[Registration, int]], views: bool = True
                          ) -> list[tuple[wire.RemoteMember | None, bool]]:
        body = {"items": [[reg.record(), rev] for reg, rev in items], "views": views}
        answer = await self._write("/records", body)
        return [(wire.RemoteMember.from_json(r["member"], True) if "member" in r else None, bool(r["created"]))
                if r else (None, False) for r in answer["results"]]

    async def restore_records(self, items: list[Record]) -> int:
        answer = await self.call("POST", "/restore", {"items": items}, timeout_s=WRITE_TIMEOUT_S)
        return int(answer["applied"])

    async def delete_record(self, instance_id: str, revision: int) -> bool:
        answer = await self._write("/delete", {"items": [[instance_id, revision]]})
        return bool(answer["deleted"][0])

    async def _write(self, path: str, body: dict[str, Any]) -> Any:
        """A write, with this node's view; `StaleRing` when the member has moved past this node's ring."""
        if self.view is not None:
            body["view"] = list(self.view())
        try:
            return await self.call("POST", path, body, timeout_s=WRITE_TIMEOUT_S)
        except SemregError as exc:
            if exc.status != 409:
                raise
            if self.on_stale is not None:
                self.on_stale()
            raise StaleRing(f"{self.member_id} refused the write: {exc.message}") from exc

    async def heartbeat(self, instance_id: str, load: float | None, status: str | None,
                        revision: int | None = None) -> wire.RemoteMember:
        answer = await self.call("POST", f"/heartbeat/{instance_id}", {"load": load, "status": status,
                                                                        "revision": revision})
        return wire.RemoteMember.from_json(answer, True)

    async def set_status(self, instance_id: str, status: str, replaces: Collection[str] | None = None,
                         revision: int | None = None) -> wire.RemoteMember:
        answer = await self.call("POST", f"/status/{instance_id}",
                                 {"status": status, "replaces": None if replaces is None else sorted(replaces),
                                  "revision": revision})
        return wire.RemoteMember.from_json(answer, True)

    async def apply_states(self, states: list[State]) -> int:
        answer = await self.call("POST", "/states", {"states": states})
        return int(answer["applied"])

    async def record_route(self, instance_id: str) -> None:
        await self.call("POST", f"/routes/{instance_id}")

    # -- reads -------------------------------------------------------------------------------------
    async def get(self, instance_id: str) -> wire.RemoteMember:
        return wire.RemoteMember.from_json(await self.call("GET", f"/instances/{instance_id}"), True)

    async def registered_by(self, ids: list[str]) -> dict[str, tuple[int, str | None, str]]:
        answer = await self.call("POST", "/registered-by", {"ids": ids})
        return {iid: (int(rev), owner, str(env)) for iid, (rev, owner, env) in answer["found"].items()}

    async def instances(self, service: str | None, tags: bool = True) -> Held[list[wire.RemoteMember]]:
        answer = await self.call("GET", "/instances", params={"service": service, "tags": "true" if tags else "false"})
        return Held([wire.RemoteMember.from_json(m, tags) for m in answer["members"]], wire.removed_from_json(answer))

    async def resolve(self, q: Question) -> discovery.Part:
        _, content = await self.raw("POST", "/discover", {"query": wire.query_json(q)})
        return wire.part_from_bytes(content, q.tags)

    async def holders(self, tags: list[Tag], with_tags: bool = True) -> Held[dict[Tag, list[wire.RemoteMember]]]:
        answer = await self.call("POST", "/holders", {"tags": [list(t) for t in tags], "with_tags": with_tags})
        return wire.holders_from_json(answer, with_tags)

    async def matching_tags(self, query: Tag, match: frozenset[str]) -> list[Match]:
        answer = await self.call("POST", "/matching-tags", {"tag": list(query), "match": sorted(match)})
        return [(Tag(s, p, o), degree, int(distance)) for s, p, o, degree, distance in answer["matches"]]

    async def tag_holders(self, selector: Selector) -> Held[dict[Tag, set[str]]]:
        answer = await self.call("POST", "/tags", {"selector": selector.as_json()})
        return Held({Tag(s, p, o): set(ids) for s, p, o, ids in answer["tags"]}, wire.removed_from_json(answer))

    async def names_term(self, iri: str) -> bool:
        return bool((await self.call("GET", "/terms", params={"iri": iri}))["named"])

    async def counts(self, environments: frozenset[str] | None, known: str | None = None) -> Tally:
        body = {"environments": None if environments is None else sorted(environments), "known": known}
        return wire.tally_from_json(await self.call("POST", "/counts", body))

    # -- repair and hand-off ----------------------------------------------------------------------------
    async def inventory(self, ids: Iterable[str] | None = None) -> dict[str, int]:
        answer = await self.call("POST", "/inventory", {"ids": list(ids) if ids is not None else None},
                                 timeout_s=WRITE_TIMEOUT_S)
        return {k: int(v) for k, v in answer["inventory"].items()}

    async def digests(self, ring: Arcs, arcs: list[int]) -> dict[int, Digest] | None:
        """Its digests of these arcs of `ring`; None when the member places over another ring."""
        try:
            answer = await self.call("POST", "/digests", {"checksum": ring.checksum, "arcs": arcs},
                                     timeout_s=WRITE_TIMEOUT_S)
        except SemregError as exc:
            if exc.status == 409:
                return None
            raise
        return {int(arc): (int(d[0]), int(d[1]), int(d[2])) for arc, d in answer["digests"].items()}

    async def export(self, ids: Iterable[str]) -> list[Record]:
        answer = await self.call("POST", "/export", {"ids": list(ids)}, timeout_s=WRITE_TIMEOUT_S)
        return [(rec, int(rev)) for rec, rev in answer["items"]]

    # -- the member's own: its change log and its ontologies ----------------------------------------------
    async def changes(self, epoch: int | None, cursor: int, wait_s: float) -> ChangesPage:
        page: ChangesPage = await self.call("GET", "/changes", params={"epoch": epoch, "after": cursor, "wait": wait_s},
                                            timeout_s=wait_s + self.timeout_s)
        return page

    async def cursor(self) -> tuple[int, int]:
        """(epoch, cursor) of its change log."""
        answer = await self.call("GET", "/cursor")
        return int(answer["epoch"]), int(answer["cursor"])

    async def ontology(self, name: str) -> tuple[bytes, str]:
        head, content = await self.raw("GET", f"/ontologies/{name}", timeout_s=WRITE_TIMEOUT_S)
        return content, head.headers.get("content-type", "text/turtle")


def _removed(content: bytes) -> int | None:
    """The revision of the removal a 404 names, if it names one (`semreg.registry.shard.Removed`)."""
    try:
        found = orjson.loads(content).get("removed")
    except (orjson.JSONDecodeError, AttributeError):
        return None
    return found if isinstance(found, int) and not isinstance(found, bool) else None


def _error(status: int, content: bytes) -> str:
    try:
        return str(orjson.loads(content).get("error", ""))[:300] or f"HTTP {status}"
    except (orjson.JSONDecodeError, AttributeError):
        return content[:300].decode("utf-8", "replace") or f"HTTP {status}"


def unavailable(missing: Iterable[str]) -> Unavailable:
    return Unavailable(f"no owner of this instance answered (tried {', '.join(sorted(missing))}); try again.")
