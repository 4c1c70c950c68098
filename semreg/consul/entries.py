"""A semreg instance (this node's, or another member's as it answered) as Consul's clients read it: the agent's
service (`AgentService`), the catalog's entry (`CatalogService`), the health entry (`{Node, Service, Checks}`) and
the node, one a semreg node.

Statuses: `up` is Consul's passing, `blocked` warning (it is listed, and takes no new work), `critical`
critical; `draining` is Consul's maintenance mode, a passing service check beside a critical
`_service_maintenance:<ID>` check, as Consul shows it. An instance a saved query found carries its match in its
`Meta` (`semreg-degree`, `semreg-distance`). Indexes are the registry's watch index: Consul's `CreateIndex` and
`ModifyIndex` have no counterpart per instance here, so both are the answer's index.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from semreg.consul.registration import CRITICAL, PASSING, WARNING
from semreg.consul.tags import consul_tags, own_meta

BY_STATUS = {"up": PASSING, "blocked": WARNING, "critical": CRITICAL, "draining": PASSING}
TO_STATUS = {PASSING: "up", WARNING: "blocked", CRITICAL: "critical"}
DEGREE_KEY, DISTANCE_KEY = "semreg-degree", "semreg-distance"


@dataclass(frozen=True)
class NodeInfo:
    """This semreg node as Consul's one agent and catalog node: its name, address and datacenter."""

    name: str
    address: str
    datacenter: str
    version: str
    peer: str  # the Consul listener's HOST:PORT, what `/v1/status/leader` names

    def entry(self, index: int = 0) -> dict[str, Any]:
        return {"ID": "", "Node": self.name, "Address": self.address, "Datacenter": self.datacenter,
                "TaggedAddresses": {"lan": self.address, "wan": self.address}, "Meta": {"semreg": self.version},
                "CreateIndex": index, "ModifyIndex": index}


def tag_texts(inst: Any) -> list[str]:
    """An instance's semantic tags as text: this node's instances hold them; another member's are in the view it
    answered (when the read asked for tags)."""
    tags = getattr(inst.reg, "tags", None)
    if tags is not None:
        return [t.text for t in tags]
    return [f"{t['s']} {t['p']} {t['o']}" for t in (inst.view.get("tags") or ())]


def active_check(inst: Any) -> dict[str, Any]:
    """The instance's active check (empty for none), from its registration here or another member's view."""
    if hasattr(inst.reg, "check"):
        return dict(inst.reg.check or {})
    return dict(inst.view.get("check") or {})


def check_output(inst: Any) -> str:
    """What the active check last said ('' before it ran, or without one)."""
    note = getattr(inst, "health", None)
    if note is not None:
        return str(note.check_output) if note.check_at_wall is not None else ""
    if hasattr(inst, "view") and isinstance(inst.view, dict):
        return str((inst.view.get("last_check") or {}).get("output", ""))
    return ""


def check_type(inst: Any) -> str:
    check = active_check(inst)
    return "http" if "http" in check else "tcp" if "tcp" in check else "ttl"


def consul_tags_of(inst: Any) -> list[str]:
    return consul_tags(inst.reg.meta, tag_texts(inst))


def meta_of(inst: Any, match: Any = None) -> dict[str, str]:
    meta = own_meta(inst.reg.meta)
    if match is not None:
        meta[DEGREE_KEY], meta[DISTANCE_KEY] = str(match[1]), str(match[2])
    return meta


def service(inst: Any, datacenter: str, match: Any = None, index: int = 0) -> dict[str, Any]:
    """The agent's view of a service (`GET /v1/agent/service/{id}`, and the health entry's `Service`)."""
    r = inst.reg
    return {"ID": r.id, "Service": r.service, "Tags": consul_tags_of(inst), "Meta": meta_of(inst, match),
            "Port": r.port, "Address": r.address, "TaggedAddresses": {}, "Weights": {"Passing": r.weight, "Warning": 1},
            "EnableTagOverride": False, "Datacenter": datacenter, "Namespace": r.environment,
            "CreateIndex": index, "ModifyIndex": index}


def checks(inst: Any, node: NodeInfo, index: int = 0) -> list[dict[str, Any]]:
    """The node's serf check (always passing: it answers), the service's own check, and the maintenance check
    of a draining instance."""
    r = inst.reg
    tags = consul_tags_of(inst)
    output = check_output(inst)

    def one(check_id: str, name: str, status: str, kind: str, output: str = "", notes: str = "") -> dict[str, Any]:
        return {"Node": node.name, "CheckID": check_id, "Name": name, "Status": status, "Notes": notes,
                "Output": output, "ServiceID": r.id, "ServiceName": r.service, "ServiceTags": tags, "Type": kind,
                "Namespace": r.environment, "CreateIndex": index, "ModifyIndex": index}

    out = [{**one("serfHealth", "Serf Health Status", PASSING, "", "Agent alive and reachable"),
            "ServiceID": "", "ServiceName": "", "ServiceTags": []},
           one(f"service:{r.id}", f"Service '{r.service}' check", BY_STATUS.get(inst.status, CRITICAL),
               check_type(inst), output)]
    if inst.status == "draining":
        out.append(one(f"_service_maintenance:{r.id}", "Service Maintenance Mode", CRITICAL, "maintenance",
                       notes="draining"))
    return out


def passing(inst: Any) -> bool:
    """Whether every check of the instance passes (Consul's `?passing`): only an `up` one."""
    return bool(inst.status == "up")


def health(inst: Any, node: NodeInfo, match: Any = None, index: int = 0) -> dict[str, Any]:
    return {"Node": node.entry(index), "Service": service(inst, node.datacenter, match, index),
            "Checks": checks(inst, node, index)}


def catalog(inst: Any, node: NodeInfo, match: Any = None, index: int = 0) -> dict[str, Any]:
    r = inst.reg
    return {"ID": "", "Node": node.name, "Address": node.address, "Datacenter": node.datacenter,
            "TaggedAddresses": {"lan": node.address, "wan": node.address}, "NodeMeta": {"semreg": node.version},
            "ServiceKind": "", "ServiceID": r.id, "ServiceName": r.service, "ServiceTags": consul_tags_of(inst),
            "ServiceAddress": r.address, "ServicePort": r.port, "ServiceMeta": meta_of(inst, match),
            "ServiceWeights": {"Passing": r.weight, "Warning": 1}, "ServiceEnableTagOverride": False,
            "Namespace": r.environment, "CreateIndex": index, "ModifyIndex": index}
