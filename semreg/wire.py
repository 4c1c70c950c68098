"""What crosses between nodes, as JSON: instances, discovery parts, queries, changes, records.

An instance travels as its view (with or without tags), its revision and state version, and what a
coordinator needs to route to it; on arrival it is a `RemoteMember`, which discovery, routing and
rendering treat as they treat a local `Instance`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import orjson

from semreg import discovery
from semreg.balancer import priority_of
from semreg.catalogue import Match
from semreg.instances import Instance
from semreg.registry import Change
from semreg.terms import Tag


def member_json(inst: Instance, tags: bool) -> dict[str, Any]:
    r = inst.reg
    return {"view": orjson.Fragment(inst.view_json(tags)), "revision": inst.revision,
            "state_version": inst.state_version, "status": inst.status, "load": inst.load,
            "routes": inst.routes_since_report, "owner": r.owner}


@dataclass(frozen=True)
class RemoteReg:
    """The registration fields a coordinator reads of an instance on another node."""

    id: str
    service: str
    address: str
    port: int
    scheme: str
    weight: int
    capacity: int | None
    meta: dict[str, str]
    owner: str | None = None
    ttl_s: float = 0.0


@dataclass(eq=False)
class RemoteMember:
    """An instance held by another node, as it answered."""

    view: dict[str, Any]
    revision: int
    state_version: int
    status: str
    load: float
    routes_since_report: int
    tagged: bool
    id: str = field(init=False)
    reg: RemoteReg = field(init=False)
    _bytes: bytes | None = None

    def __post_init__(self) -> None:
        v = self.view
        self.id = v["id"]
        self.reg = RemoteReg(v["id"], v["service"], v["address"], int(v["port"]), v.get("scheme", "http"),
                             int(v.get("weight", 1)), v.get("capacity"), dict(v.get("meta") or {}), v.get("owner"),
                             float(v.get("ttl") or 0))

    @classmethod
    def from_json(cls, data: dict[str, Any], tagged: bool) -> RemoteMember:
        member = cls(data["view"], int(data["revision"]), int(data.get("state_version", 0)), data["status"],
                     float(data.get("load", 0.0)), int(data.get("routes", 0)), tagged)
        if data.get("owner") is not None:
            member.reg = RemoteReg(**{**member.reg.__dict__, "owner": data["owner"]})
        return member

    @property
    def state(self) -> tuple[str, int, str]:
        return (self.id, self.revision, self.status)

    @property
    def priority(self) -> float:
        return priority_of(self.reg.meta) if self.reg.meta else math.inf

    def view_json(self, tags: bool = True) -> bytes:
        if not tags and self.tagged:
            return orjson.dumps({k: v for k, v in self.view.items() if k != "tags"})
        if self._bytes is None:
            self._bytes = orjson.dumps(self.view)
        return self._bytes

    def expires_at_text(self) -> str | None:
        return self.view.get("expires_at")


def query_json(q: discovery.DiscoverQuery) -> dict[str, Any]:
    return {"tag": list(q.tag), "match": sorted(q.match), "service": q.service, "any_status": q.any_status,
            "tags": q.tags}


def query_from_json(data: dict[str, Any]) -> discovery.DiscoverQuery:
    return discovery.DiscoverQuery(Tag(*data["tag"]), frozenset(data["match"]), data.get("service"),
                                   bool(data.get("any_status")), None, bool(data.get("tags")))


def part_json(part: discovery.Part, tags: bool) -> dict[str, Any]:
    members: dict[str, Any] = {}
    matches = []
    for (tag, degree, distance), group in part.matches:
        ids = []
        for inst in group:
            if inst.id not in members:
                members[inst.id] = member_json(inst, tags)  # type: ignore[arg-type]
            ids.append(inst.id)
        matches.append([*tag, degree, distance, ids])
    return {"matches": matches, "members": members, "matched_tags": [list(t) for t in part.matched_tags]}


def part_from_json(data: dict[str, Any], tags: bool) -> discovery.Part:
    members = {iid: RemoteMember.from_json(m, tags) for iid, m in data["members"].items()}
    matches: list[tuple[Match, list[Any]]] = []
    for s, p, o, degree, distance, ids in data["matches"]:
        matches.append(((Tag(s, p, o), degree, int(distance)), [members[i] for i in ids]))
    return discovery.Part(matches, frozenset(Tag(*t) for t in data["matched_tags"]))


def change_json(c: Change) -> list[Any]:
    return [c.id, c.reason, c.revision, c.status, c.membership, [list(t) for t in c.tags], sorted(c.services)]


def change_from_json(data: list[Any]) -> Change:
    iid, reason, revision, status, membership, tags, services = data
    return Change(iid, reason, int(revision), status, bool(membership), frozenset(Tag(*t) for t in tags),
                  frozenset(services))
