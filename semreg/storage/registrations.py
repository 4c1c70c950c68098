"""Registrations read back from their RDF (`semreg.storage.vocabulary.record_nquads`): the inverse of the
writer, for a backup being restored and for a data directory whose records must be rebuilt.

`Reader` takes quads in any order (a file, a store), keeps the few that describe registrations, and
`records()` gives each one as the durable record `LocalShard` restores (`Registration.record()` with
`registered_at` wall seconds and `admin_status`) with its revision; what cannot be a registration is a
`Problem` naming the instance and the reason, never an exception from deep inside. A quad read twice is kept
once (RDF is a set), so a file that repeats a line does not grow what is kept; `kept` says roughly how many
bytes of text the tag and meta entries kept so far hold, for a reader that bounds it.
"""
from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pyoxigraph as ox

from semreg.rdf.terms import RDF, SR
from semreg.storage.store import INSTANCE_PREFIX, RECORDS, REGISTRY

_TYPE = RDF + "type"
_INSTANCE = SR + "Instance"
_ADMIN_STATUSES = ("up", "draining", "blocked", "critical")  # critical: reported by the service (a Consul TTL check)
_SINGLE = {"id": "id", "service": "service", "environment": "environment", "address": "address", "port": "port",
           "scheme": "scheme", "status": "status", "weight": "weight", "capacity": "capacity", "ttl": "ttl",
           "deregisterAfter": "deregister_after", "registeredAt": "registered_at", "checkHttp": "check_http",
           "checkTcp": "check_tcp", "checkInterval": "check_interval", "checkTimeout": "check_timeout"}
_BY_IRI = {SR + name: key for name, key in _SINGLE.items()}
_TAG, _META, _KEY, _VALUE = SR + "tag", SR + "meta", SR + "key", SR + "value"
_SUBJECT, _PREDICATE, _OBJECT = RDF + "subject", RDF + "predicate", RDF + "object"
_REVISION, _OWNER = SR + "revision", SR + "owner"


@dataclass(frozen=True)
class Problem:
    instance: str
    reason: str

    def __str__(self) -> str:
        return f"instance {self.instance}: {self.reason}"


class Reader:
    """Collects the quads of registrations; `records()` once they have all been seen."""

    def __init__(self) -> None:
        self._fields: dict[str, dict[str, Any]] = {}  # instance IRI → field → lexical value
        self._typed: set[str] = set()
        # IRI → (tag|meta, node), in the order first read (a dict kept as an ordered set)
        self._links: dict[str, dict[tuple[str, ox.BlankNode | ox.NamedNode], None]] = {}
        self._nodes: dict[ox.BlankNode | ox.NamedNode, dict[str, str]] = {}  # tag and meta nodes' fields
        self._books: dict[str, dict[str, str]] = {}  # IRI → revision, owner (urn:semreg:records)
        self.kept = 0  # bytes of text in the links and nodes kept, roughly (each entry counted with 32 of overhead)

    def add(self, quad: ox.Quad) -> bool:
        """Take one quad; False when it is not about registrations (the caller keeps it or not)."""
        g = quad.graph_name
        if g == REGISTRY:
            self._registry(quad)
            return True
        if g == RECORDS and isinstance(quad.subject, ox.NamedNode) and quad.subject.value.startswith(INSTANCE_PREFIX):
            p = quad.predicate.value
            if p in (_REVISION, _OWNER) and isinstance(quad.object, ox.Literal):
                self._books.setdefault(quad.subject.value, {})[p] = quad.object.value
                return True
        return False

    def extend(self, quads: Iterable[ox.Quad]) -> None:
        for quad in quads:
            self.add(quad)

    def _registry(self, quad: ox.Quad) -> None:
        s, p, o = quad.subject, quad.predicate.value, quad.object
        if isinstance(s, ox.NamedNode) and s.value.startswith(INSTANCE_PREFIX):
            if p == _TYPE and isinstance(o, ox.NamedNode) and o.value == _INSTANCE:
                self._typed.add(s.value)
            elif p in (_TAG, _META) and isinstance(o, (ox.BlankNode, ox.NamedNode)):
                links = self._links.setdefault(s.value, {})
                if (p, o) not in links:
                    links[(p, o)] = None
                    self.kept += len(o.value) + 32
            elif (key := _BY_IRI.get(p)) is not None and isinstance(o, ox.Literal):
                self._fields.setdefault(s.value, {})[key] = o.value
            return
        if isinstance(s, (ox.BlankNode, ox.NamedNode)) and p in (_SUBJECT, _PREDICATE, _OBJECT, _KEY, _VALUE):
            fields = self._nodes.get(s)
            if fields is None:
                fields = self._nodes[s] = {}
                self.kept += len(s.value) + 32
            value = o.value if isinstance(o, (ox.NamedNode, ox.Literal)) else ""
            self.kept += len(value) - len(fields.get(p, ""))
            fields[p] = value

    @property
    def count(self) -> int:
        return len(self._typed)

    def records(self) -> tuple[list[tuple[dict[str, Any], int]], list[Problem]]:
        """Every registration read (record, revision), and what could not be read."""
        out, problems = [], []
        for iri in sorted(self._typed):
            try:
                out.append(self._record(iri))
            except (KeyError, ValueError, TypeError) as exc:
                problems.append(Problem(iri[len(INSTANCE_PREFIX):], _reason(exc)))
        return out, problems

    def _record(self, iri: str) -> tuple[dict[str, Any], int]:
        f = self._fields.get(iri, {})
        for required in ("id", "service", "address", "port"):
            if required not in f:
                raise KeyError(required)
        if f["id"] != iri[len(INSTANCE_PREFIX):]:
            raise ValueError(f"its sr:id '{f['id']}' is not the id of its IRI")
        tags, meta = [], []
        for kind, node in self._links.get(iri, ()):
            fields = self._nodes.get(node, {})
            if kind == _TAG:
                tags.append((_position(node), [fields[_SUBJECT], fields[_PREDICATE], fields[_OBJECT]]))
            else:
                meta.append((_position(node), fields[_KEY], fields[_VALUE]))
        check = None
        if "check_http" in f or "check_tcp" in f:
            check = {"http": f.get("check_http"), "tcp": f.get("check_tcp"),
                     "interval": float(f.get("check_interval", 10.0)), "timeout": float(f.get("check_timeout", 2.0))}
        books = self._books.get(iri, {})
        status = f.get("status", "up")
        rec: dict[str, Any] = {
            "id": f["id"], "service": f["service"], "address": f["address"], "port": int(f["port"]),
            "scheme": f.get("scheme", "http"), "tags": [t for _, t in sorted(tags)], "weight": int(f.get("weight", 1)),
            "capacity": int(f["capacity"]) if "capacity" in f else None, "ttl": float(f.get("ttl", 30)),
            "deregister_after": float(f.get("deregister_after", 90)), "check": check, "meta": {k: v for _, k, v in sorted(meta)},
            "owner": books.get(_OWNER), "environment": f.get("environment", "default")}
        if "registered_at" in f:
            rec["registered_at"] = dt.datetime.fromisoformat(f["registered_at"]).timestamp()
        if status in _ADMIN_STATUSES and status != "up":
            rec["admin_status"] = status
        return rec, int(books.get(_REVISION, "0"))


def _position(node: ox.BlankNode | ox.NamedNode) -> tuple[int, str]:
    """Where a tag or meta entry came in its registration: the writer labels its nodes `...t{n}` and
    `...m{n}`; nodes labelled otherwise (a store renames blank nodes) come after, in the order of what they say."""
    label = node.value
    digits = len(label) - len(label.rstrip("0123456789"))
    if digits and label[-digits - 1:-digits] in ("t", "m"):
        return int(label[-digits:]), label
    return 1 << 62, ""


def _reason(exc: Exception) -> str:
    if isinstance(exc, KeyError):
        return f"it has no {exc.args[0]}" if exc.args and isinstance(exc.args[0], str) else "a tag or meta entry is incomplete"
    return str(exc)
