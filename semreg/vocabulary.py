"""The registry vocabulary (https://w3id.org/semreg#, `sr:`): an instance as RDF.

    ?i a sr:Instance ; sr:id ?id ; sr:service ?svc ; sr:address ?a ; sr:port ?port ; sr:scheme ?sch ;
       sr:status ?st ; sr:weight ?w ; sr:capacity ?c ; sr:ttl ?ttl ; sr:deregisterAfter ?d ;
       sr:registeredAt ?when ; sr:checkHttp ?url ; sr:checkTcp ?hostport ;
       sr:meta [ sr:key ?k ; sr:value ?v ] ; sr:tag ?t .
    ?t a rdf:Statement ; rdf:subject ?s ; rdf:predicate ?p ; rdf:object ?o .

Wildcard components are `sr:Any`. Instance IRIs are `urn:semreg:instance:{id}`; every quad is in the
graph `urn:semreg:registry`.
"""
from __future__ import annotations

from typing import Any

import pyoxigraph as ox

from semreg.store import REGISTRY, instance_node
from semreg.terms import RDF, SR, XSD

_T = {name: ox.NamedNode(SR + name) for name in (
    "Instance", "id", "service", "address", "port", "scheme", "status", "weight", "capacity", "ttl",
    "deregisterAfter", "registeredAt", "tag", "meta", "key", "value", "checkHttp", "checkTcp")}
TYPE = ox.NamedNode(RDF + "type")
STATEMENT = ox.NamedNode(RDF + "Statement")
SUBJ, PRED, OBJ = (ox.NamedNode(RDF + x) for x in ("subject", "predicate", "object"))
INTEGER, DECIMAL, DATETIME = (ox.NamedNode(XSD + x) for x in ("integer", "decimal", "dateTime"))


def instance_quads(view: dict[str, Any]) -> list[ox.Quad]:
    """The registry-vocabulary RDF of one instance view."""
    g = REGISTRY
    i = instance_node(view["id"])

    def lit(value: Any, datatype: ox.NamedNode | None = None) -> ox.Literal:
        return ox.Literal(str(value), datatype=datatype) if datatype else ox.Literal(str(value))

    q = [ox.Quad(i, TYPE, _T["Instance"], g), ox.Quad(i, _T["id"], lit(view["id"]), g),
         ox.Quad(i, _T["service"], lit(view["service"]), g), ox.Quad(i, _T["address"], lit(view["address"]), g),
         ox.Quad(i, _T["port"], lit(view["port"], INTEGER), g), ox.Quad(i, _T["scheme"], lit(view["scheme"]), g),
         ox.Quad(i, _T["status"], lit(view["status"]), g), ox.Quad(i, _T["weight"], lit(view["weight"], INTEGER), g),
         ox.Quad(i, _T["ttl"], lit(view["ttl"], DECIMAL), g),
         ox.Quad(i, _T["deregisterAfter"], lit(view["deregister_after"], DECIMAL), g)]
    if view.get("capacity") is not None:
        q.append(ox.Quad(i, _T["capacity"], lit(view["capacity"], INTEGER), g))
    if view.get("registered_at"):
        q.append(ox.Quad(i, _T["registeredAt"], lit(view["registered_at"], DATETIME), g))
    check = view.get("check") or {}
    if check.get("http"):
        q.append(ox.Quad(i, _T["checkHttp"], lit(check["http"]), g))
    if check.get("tcp"):
        q.append(ox.Quad(i, _T["checkTcp"], lit(check["tcp"]), g))
    for k, v in (view.get("meta") or {}).items():
        m = ox.BlankNode()
        q += [ox.Quad(i, _T["meta"], m, g), ox.Quad(m, _T["key"], lit(k), g), ox.Quad(m, _T["value"], lit(v), g)]
    for tag in view["tags"]:
        t = ox.BlankNode()
        q += [ox.Quad(i, _T["tag"], t, g), ox.Quad(t, TYPE, STATEMENT, g),
              ox.Quad(t, SUBJ, ox.NamedNode(tag["s"]), g), ox.Quad(t, PRED, ox.NamedNode(tag["p"]), g),
              ox.Quad(t, OBJ, ox.NamedNode(tag["o"]), g)]
    return q
