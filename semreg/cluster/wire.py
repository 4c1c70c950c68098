"""What crosses between nodes, as JSON: instances, discovery parts, queries, changes, records.

A member's overview counts (`semreg.registry.environment_counts.Tally`) travel as JSON with their tag
hashes as base64 of the packed bytes (8 bytes a tag, 10⅔ characters).

An instance travels as its view (with or without tags), its revision and state version, and what a
coordinator needs to route to it; on arrival it is a `RemoteMember`, which discovery, routing and
rendering treat as they treat a local `Instance`.
"""
from __future__ import annotations

import base64
import math
from dataclasses import dataclass
from typing import Any

import orjson

from semreg import kept_json
from semreg.rdf.terms import Tag
from semreg.reasoning.matching import floor_of
from semreg.registry import discovery
from semreg.registry.balancer import priority_of
from semreg.registry.conjunctive import Combined, ConjunctiveQuery
from semreg.registry.environment_counts import Tally
from semreg.registry.instances import Instance
from semreg.registry.questions import Question
from semreg.registry.registry import Change
from semreg.registry.selector import DEFAULT as DEFAULT_ENVIRONMENT
from semreg.registry.selector import Selector
from semreg.registry.shard import Held


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
    environment: str = DEFAULT_ENVIRONMENT


class RemoteMember:
    """An instance held by another node, as it answered: its versions and status, and its view as the
    bytes that node rendered (parsed only when something reads a registration field, as routing does)."""

    __slots__ = ("id", "revision", "state_version", "status", "load", "routes_since_report", "owner", "tagged",
                 "_bytes", "_view", "_reg")

    def __init__(self, iid: str, revision: int, state_version: int, status: str, load: float, routes: int,
                 owner: str | None, tagged: bool, view_bytes: bytes | None = None,
                 view: dict[str, Any] | None = None) -> None:
        self.id = iid
        self.revision = revision
        self.state_version = state_version
        self.status = status
        self.load = load
        self.routes_since_report = routes
        self.owner = owner
        self.tagged = tagged
        self._bytes = view_bytes
        self._view = view
        self._reg: RemoteReg | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any], tagged: bool) -> RemoteMember:
        view = data["view"]
        return cls(view["id"], int(data["revision"]), int(data.get("state_version", 0)), data["status"],
                   float(data.get("load", 0.0)), int(data.get("routes", 0)), data.get("owner"), tagged, view=view)

    @property
    def view(self) -> dict[str, Any]:
        if self._view is None:
            assert self._bytes is not None
            self._view = orjson.loads(self._bytes)
        return self._view

    @property
    def reg(self) -> RemoteReg:
        if self._reg is None:
            v = self.view
            self._reg = RemoteReg(v["id"], v["service"], v["address"], int(v["port"]), v.get("scheme", "http"),
                                  int(v.get("weight", 1)), v.get("capacity"), dict(v.get("meta") or {}), self.owner,
                                  float(v.get("ttl") or 0), v.get("environment") or DEFAULT_ENVIRONMENT)
        return self._reg

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
            self._bytes = kept_json.dumps(self._view)
        return self._bytes

    def expires_at_text(self) -> str | None:
        return self.view.get("expires_at")


def query_json(q: Question) -> dict[str, Any]:
    """A question as a shard is asked it (a conjunction's patterns as `all`, with `provided`)."""
    common = {"match": sorted(q.match), "service": q.service, "any_status": q.any_status, "tags": q.tags,
              "selector": q.selector.as_json(), "report_excluded": q.report_excluded}
    if isinstance(q, ConjunctiveQuery):
        provided = None if q.provided is None else [list(t) for t in q.provided]
        return {"all": [list(t) for t in q.patterns], "provided": provided, **common}
    return {"tag": list(q.tag), **common}


def query_from_json(data: dict[str, Any]) -> Question:
    """A question as `query_json` sent it, each part of its type (`TypeError` or `ValueError` otherwise)."""
    match, tags = match_from_json(data["match"]), bool(data.get("tags"))
    service = data.get("service")
    if service is not None and not isinstance(service, str):
        raise TypeError(f"a question's service is a string, not {type(service).__name__}")
    any_status, selector = bool(data.get("any_status")), Selector.from_json(data.get("selector"))
    report_excluded = bool(data.get("report_excluded"))
    if "all" in data:
        provided = data.get("provided")
        return ConjunctiveQuery(tuple(tag_from_json(t) for t in data["all"]), match,
                                None if provided is None else tuple(tag_from_json(t) for t in provided), service,
                                any_status, None, tags, selector, report_excluded)
    return discovery.DiscoverQuery(tag_from_json(data["tag"]), match, service, any_status, None, tags, selector,
                                   report_excluded)


def tag_from_json(data: Any) -> Tag:
    """A tag as `list(tag)` sent it: one to three strings (`TypeError` otherwise)."""
    if not isinstance(data, list) or not 1 <= len(data) <= 3 or not all(isinstance(t, str) for t in data):
        raise TypeError(f"a tag is a list of one to three strings, not {str(data)[:80]}")
    return Tag(*data)


def match_from_json(data: Any) -> frozenset[str]:
    """A match set as `sorted(match)` sent it: strings, a similarity floor among them a number (`ValueError`
    otherwise)."""
    if not isinstance(data, list) or not all(isinstance(m, str) for m in data):
        raise TypeError(f"a match set is a list of strings, not {str(data)[:80]}")
    match = frozenset(data)
    floor_of(match)
    return match


def holders_bytes(tags: list[Tag], found: dict[Tag, list[Instance]], with_tags: bool,
                  removed: dict[str, int] | None = None) -> bytes:
    """A shard's holders of each tag, each instance once however many of the tags it holds (one holding
    100 of them, with its 1,000 tags, would otherwise travel 100 times)."""
    index: dict[str, int] = {}
    members: list[dict[str, Any]] = []
    holders = []
    for tag in tags:
        refs = []
        for inst in found.get(tag, ()):
            n = index.get(inst.id)
            if n is None:
                n = index[inst.id] = len(members)
                members.append(member_json(inst, with_tags))
            refs.append(n)
        holders.append([list(tag), refs])
    return orjson.dumps({"members": members, "holders": holders, "removed": removed or {}})


def holders_from_json(data: dict[str, Any], with_tags: bool) -> Held[dict[Tag, list[RemoteMember]]]:
    members = [RemoteMember.from_json(m, with_tags) for m in data["members"]]
    return Held({Tag(*t): [members[n] for n in refs] for t, refs in data["holders"]}, removed_from_json(data))


def removed_from_json(data: dict[str, Any]) -> dict[str, int]:
    """A shard's recent removals, as an answer carries them (`semreg.registry.shard.Held`)."""
    return {str(iid): int(revision) for iid, revision in (data.get("removed") or {}).items()}


PART_MEDIA_TYPE = "application/x-semreg-part"


def part_bytes(part: discovery.Part, tags: bool) -> bytes:
    """A shard's part as one line of JSON (its matches, and each member's versions, once) followed by one
    line per member: the view bytes it renders, as they are (a view is one line of JSON)."""
    index: dict[str, int] = {}
    members: list[list[Any]] = []
    views: list[bytes] = []
    matches = []
    in_matches = set()
    for m, group in part.matches:
        tag, degree, distance = m[:3]
        refs = []
        for inst in group:
            n = index.get(inst.id)
            if n is None:
                n = index[inst.id] = len(members)
                local: Any = inst  # a local Instance: the shard answering is this node's
                members.append([local.id, local.revision, local.state_version, local.status, local.load,
                                local.routes_since_report, local.reg.owner])
                views.append(local.view_json(tags))
            refs.append(n)
        in_matches.add(tag)
        if isinstance(m, Combined):  # a conjunction's: each pattern's match too
            in_matches.update(p[0] for p in m.patterns)
            matches.append([*tag, degree, distance, refs, [[*p[0], p[1], p[2]] for p in m.patterns], m.similarity,
                            m.provided, m.score, None if m.signals is None else list(m.signals)])
        else:
            matches.append([*tag, degree, distance, refs])
    head = {"matches": matches, "members": members,
            "matched_only": [list(t) for t in part.matched_tags if t not in in_matches], "excluded": part.excluded,
            "removed": part.removed}
    return b"\n".join([orjson.dumps(head), *views])


def part_from_bytes(data: bytes, tags: bool) -> discovery.Part:
    lines = data.split(b"\n")
    head = orjson.loads(lines[0])
    members = [RemoteMember(iid, rev, sv, status, load, routes, owner, tags, lines[n + 1])
               for n, (iid, rev, sv, status, load, routes, owner) in enumerate(head["members"])]
    matches: list[tuple[Any, list[Any]]] = []
    matched = []
    for s, p, o, degree, distance, refs, *patterns in head["matches"]:
        tag = Tag(s, p, o)
        matched.append(tag)
        m: Any = (tag, degree, distance)
        if patterns:  # a conjunction's
            each = tuple((Tag(ps, pp, po), pd, pn) for ps, pp, po, pd, pn in patterns[0])
            matched += [e[0] for e in each]
            similarity, provided, score, signals = (*patterns[1:5], None, None)[:4]  # a node before the matchmaker
            m = Combined(tag, degree, distance, each, similarity, provided, score,  # sends no score nor signals
                         None if signals is None else tuple(signals))
        matches.append((m, [members[i] for i in refs]))
    matched += [Tag(*t) for t in head["matched_only"]]
    return discovery.Part(matches, frozenset(matched), {str(i): int(r) for i, r in head.get("excluded", {}).items()},
                          removed_from_json(head))


def tally_json(tally: Tally) -> dict[str, Any]:
    tags = None if tally.tags is None else base64.b64encode(tally.tags).decode("ascii")
    return {"by_status": tally.by_status, "services": tally.services, "environments": tally.environments,
            "tags": tags, "ring": list(tally.ring), "tags_state": tally.tags_state}


def tally_from_json(data: dict[str, Any]) -> Tally:
    """(A member of an earlier version sends no `tags_state`: its hashes are then never taken as known.)"""
    def ints(counts: dict[str, Any]) -> dict[str, int]:
        return {str(k): int(v) for k, v in counts.items()}
    tags = data["tags"]
    return Tally(ints(data["by_status"]), ints(data["services"]), ints(data["environments"]),
                 None if tags is None else base64.b64decode(tags), tuple(str(m) for m in data["ring"]),
                 str(data.get("tags_state", "")))


def change_json(c: Change) -> list[Any]:
    return [c.id, c.reason, c.revision, c.status, c.membership, [list(t) for t in c.tags], sorted(c.services),
            sorted(c.environments)]


CHANGE_FIELDS = 8  # what follows them in a logged change is the copy


def change_from_json(data: list[Any]) -> Change:
    iid, reason, revision, status, membership, tags, services, environments = data[:CHANGE_FIELDS]
    return Change(iid, reason, int(revision), status, bool(membership), frozenset(Tag(*t) for t in tags),
                  frozenset(services), frozenset(environments))


Copy = tuple[dict[str, Any], int, int]  # an instance's view (with tags), revision, state version


def logged_change_bytes(c: Change, inst: Instance | None) -> bytes:
    """A change as another node's follower reads it: the change, and, when the instance's record or
    status changed and the node still holds it, the node's copy as it is now (its own revision and
    state version: a copy newer than the change is still a copy), which that node's SPARQL replica
    shows (`semreg.cluster.replica_copies`)."""
    out = change_json(c)
    if inst is not None and c.membership and not c.removed:
        out.append([inst.revision, inst.state_version, orjson.Fragment(inst.view_json(True))])
    return orjson.dumps(out)


def logged_change_from_json(data: list[Any]) -> tuple[Change, Copy | None]:
    copy = data[CHANGE_FIELDS] if len(data) > CHANGE_FIELDS else None
    return change_from_json(data), (None if copy is None else (copy[2], int(copy[0]), int(copy[1])))
