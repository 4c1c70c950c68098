"""The registry vocabulary (https://w3id.org/semreg#, `sr:`): an instance as RDF.

    ?i a sr:Instance ; sr:id ?id ; sr:service ?svc ; sr:environment ?env ; sr:address ?a ; sr:port ?port ;
       sr:scheme ?sch ; sr:status ?st ; sr:weight ?w ; sr:capacity ?c ; sr:ttl ?ttl ; sr:deregisterAfter ?d ;
       sr:registeredAt ?when ; sr:checkHttp ?url ; sr:checkTcp ?hostport ; sr:checkInterval ?s ;
       sr:checkTimeout ?s ; sr:meta [ sr:key ?k ; sr:value ?v ] ; sr:tag ?t .
    ?t a rdf:Statement ; rdf:subject ?s ; rdf:predicate ?p ; rdf:object ?o .

Wildcard components are `sr:Any`. Instance IRIs are `urn:semreg:instance:{id}`; every quad is in the
graph `urn:semreg:registry`.

At rest (the data directory, a backup) a registration is the same triples, its `sr:status` the status it
was given (`up`, `draining`, `blocked`: what a heartbeat changes, not the live health), with semreg's
bookkeeping in `urn:semreg:records`: `?i sr:revision ?n ; sr:owner ?token` (`record_nquads`).
"""
from __future__ import annotations

from decimal import Decimal
from typing import Any

from semreg.rdf.terms import RDF, SR, XSD
from semreg.storage.store import RECORDS, REGISTRY, instance_node
from semreg.timefmt import rfc3339

TERMS = ("Instance", "id", "service", "environment", "address", "port", "scheme", "status", "weight", "capacity", "ttl",
         "deregisterAfter", "registeredAt", "tag", "meta", "key", "value", "checkHttp", "checkTcp", "checkInterval",
         "checkTimeout")


_ESCAPES = str.maketrans({"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r"})


def _decimal(value: float) -> str:
    """A number as xsd:decimal's canonical form (`30`, `0.5`, `0.0000001`), as stores keep it."""
    text = format(Decimal(repr(float(value))), "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def _datetime(text: str) -> str:
    """An RFC 3339 time in xsd:dateTime's canonical form: no trailing zeros in the fraction of a second."""
    head, dot, rest = text.partition(".")
    if not dot:
        return text
    fraction = rest.rstrip("Z").rstrip("0")
    return head + ("." + fraction if fraction else "") + ("Z" if rest.endswith("Z") else "")


def _literal(value: Any, datatype: str | None = None) -> str:
    text = '"' + str(value).translate(_ESCAPES) + '"'
    return text + f"^^<{datatype}>" if datatype else text


def instance_nquads(view: dict[str, Any]) -> str:
    """The registry-vocabulary RDF of one instance view, as N-Quads text written directly: a 1,000-tag
    instance is 5,000 quads, and building them as pyoxigraph objects to serialise them cost ~20 ms of
    the server's time (this takes ~3.5). Blank nodes are labelled by the instance id (hex) and a
    counter, so no two instances share one. IRIs here are checked already (tags; the instance IRI is
    made of a checked id)."""
    g = f"<{REGISTRY.value}>"
    i = f"<{instance_node(view['id']).value}>"
    sr = {name: f"<{SR}{name}>" for name in TERMS}
    a, xi, xd, xt = f"<{RDF}type>", XSD + "integer", XSD + "decimal", XSD + "dateTime"
    lines = [f"{i} {a} {sr['Instance']} {g} .",
             f"{i} {sr['id']} {_literal(view['id'])} {g} .",
             f"{i} {sr['service']} {_literal(view['service'])} {g} .",
             f"{i} {sr['environment']} {_literal(view['environment'])} {g} .",
             f"{i} {sr['address']} {_literal(view['address'])} {g} .",
             f"{i} {sr['port']} {_literal(view['port'], xi)} {g} .",
             f"{i} {sr['scheme']} {_literal(view['scheme'])} {g} .",
             f"{i} {sr['status']} {_literal(view['status'])} {g} .",
             f"{i} {sr['weight']} {_literal(view['weight'], xi)} {g} .",
             f"{i} {sr['ttl']} {_literal(_decimal(view['ttl']), xd)} {g} .",
             f"{i} {sr['deregisterAfter']} {_literal(_decimal(view['deregister_after']), xd)} {g} ."]
    if view.get("capacity") is not None:
        lines.append(f"{i} {sr['capacity']} {_literal(view['capacity'], xi)} {g} .")
    if view.get("registered_at"):
        lines.append(f"{i} {sr['registeredAt']} {_literal(_datetime(view['registered_at']), xt)} {g} .")
    check = view.get("check") or {}
    if check.get("http"):
        lines.append(f"{i} {sr['checkHttp']} {_literal(check['http'])} {g} .")
    if check.get("tcp"):
        lines.append(f"{i} {sr['checkTcp']} {_literal(check['tcp'])} {g} .")
    for key, term in (("interval", "checkInterval"), ("timeout", "checkTimeout")):
        if check.get(key) is not None:
            lines.append(f"{i} {sr[term]} {_literal(_decimal(check[key]), xd)} {g} .")
    label = "_:b" + view["id"].encode().hex()
    for n, (k, v) in enumerate((view.get("meta") or {}).items()):
        m = f"{label}m{n}"
        lines += [f"{i} {sr['meta']} {m} {g} .", f"{m} {sr['key']} {_literal(k)} {g} .",
                  f"{m} {sr['value']} {_literal(v)} {g} ."]
    tag, typ, statement = sr["tag"], a, f"<{RDF}Statement>"
    subj, pred, obj = f"<{RDF}subject>", f"<{RDF}predicate>", f"<{RDF}object>"
    for n, t in enumerate(view["tags"]):
        b = f"{label}t{n}"
        lines += [f"{i} {tag} {b} {g} .", f"{b} {typ} {statement} {g} .", f"{b} {subj} <{t['s']}> {g} .",
                  f"{b} {pred} <{t['p']}> {g} .", f"{b} {obj} <{t['o']}> {g} ."]
    lines.append("")
    return "\n".join(lines)


def record_view(rec: dict[str, Any]) -> dict[str, Any]:
    """A durable record (`Registration.record()` with `registered_at` wall seconds and `admin_status`) in
    the shape `instance_nquads` writes: its status the one it was given."""
    at = rec.get("registered_at")
    return {**rec, "status": rec.get("admin_status") or "up",
            "registered_at": rfc3339(float(at)) if isinstance(at, (int, float)) else None,
            "tags": [{"s": t[0], "p": t[1], "o": t[2]} for t in rec.get("tags", ())]}


def record_nquads(rec: dict[str, Any], revision: int) -> str:
    """A registration at rest: its triples in `urn:semreg:registry`, and in `urn:semreg:records` the
    revision they are of and the token that registered it (`record_books`)."""
    return instance_nquads(record_view(rec)) + record_books(rec, revision)


def record_books(rec: dict[str, Any], revision: int) -> str:
    """A registration's bookkeeping at rest, in `urn:semreg:records`: the revision its triples are of (the
    marker the data directory's writer puts last) and the token that registered it."""
    i, g = f"<{instance_node(rec['id']).value}>", f"<{RECORDS.value}>"
    lines = [f"{i} <{SR}revision> {_literal(int(revision), XSD + 'integer')} {g} ."]
    if rec.get("owner") is not None:
        lines.append(f"{i} <{SR}owner> {_literal(rec['owner'])} {g} .")
    return "\n".join(lines) + "\n"
