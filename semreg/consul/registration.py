"""A Consul service definition (`PUT /v1/agent/service/register`) as the body of a semreg registration, which
then goes through the one parser of registrations (`semreg.http.routes.instances.registrations`) as any other.

Consul's decoder matches keys without regard to case (py-consul sends `name`, `id`, `checks: [{"ttl": "10s"}]`),
so field names are read case-insensitively; the keys of `Meta` are the client's own and are kept as written.

What maps: `ID` (default `Name`), `Name`, `Tags` (`semreg.consul.tags`), `Address` (default the caller's),
`Port`, `Meta`, `Weights.Passing` (the weight), `Namespace` (the environment), and at most one TTL check (the
lease: `TTL` is the ttl, `Status` the status it starts in, critical unless given, as Consul starts a check) and one
HTTP or TCP check (semreg's active check, with `Interval` and `Timeout`), each with
`DeregisterCriticalServiceAfter` (semreg's `deregister_after`; never without it, as in Consul). A field Consul
has and semreg cannot honour (a script check, a Connect proxy, a second TTL check) is a 400 naming it, never
silently dropped; the few that change nothing here (`EnableTagOverride`, `TaggedAddresses`, a check's `Name`)
are accepted.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from semreg.consul import durations
from semreg.consul.tags import RESERVED_PREFIX, TAGS_KEY, kept, semantic
from semreg.errors import BadRequest
from semreg.rdf.terms import PrefixMap

PASSING, WARNING, CRITICAL = "passing", "warning", "critical"
CHECK_STATUSES = (PASSING, WARNING, CRITICAL)
# Consul's service definition: the fields mapped, and those accepted as changing nothing here
SERVICE_FIELDS = {"id", "name", "tags", "address", "port", "meta", "weights", "check", "checks", "namespace",
                  "kind", "enabletagoverride", "taggedaddresses", "token", "partition"}
NOT_SERVED = {"connect": "Connect", "proxy": "Proxy", "socketpath": "SocketPath", "locality": "Locality"}
CHECK_FIELDS = {"ttl", "http", "tcp", "interval", "timeout", "deregistercriticalserviceafter", "status", "name",
                "checkid", "notes", "method", "tlsskipverify", "tlsservername", "successbeforepassing",
                "failuresbeforecritical", "failuresbeforewarning", "outputmaxsize", "type"}
CHECK_NOT_SERVED = {"args": "Args", "scriptargs": "ScriptArgs", "grpc": "GRPC", "grpcusetls": "GRPCUseTLS",
                    "dockercontainerid": "DockerContainerID", "shell": "Shell", "aliasnode": "AliasNode",
                    "aliasservice": "AliasService", "h2ping": "H2PING", "udp": "UDP", "osservice": "OSService",
                    "header": "Header", "body": "Body", "disableredirects": "DisableRedirects"}


@dataclass(frozen=True)
class Definition:
    """A service definition as semreg reads it: the registration body, and the status its TTL check starts in
    (None: it has none, so nothing to report)."""

    body: dict[str, Any]
    ttl_status: str | None


def folded(data: Any, where: str) -> dict[str, Any]:
    """A JSON object's keys in lower case without underscores (Consul's decoder ignores case and takes snake_case);
    a key given twice is a 400."""
    if not isinstance(data, dict):
        raise BadRequest(f"{where} must be a JSON object.")
    out: dict[str, Any] = {}
    for key, value in data.items():
        low = key.lower().replace("_", "")  # and snake_case, as Consul translates tagged_addresses
        if low in out:
            raise BadRequest(f"{where}: the field {key} is given twice (Consul reads field names without regard to case).")
        out[low] = value
    return out


def definition(data: Any, prefixes: PrefixMap, default_address: str, default_environment: str) -> Definition:
    """The semreg registration a Consul service definition asks for; a 400 naming the field otherwise."""
    body = folded(data, "the service definition")
    unknown = sorted(k for k in body if k not in SERVICE_FIELDS)
    for key in unknown:
        if key in NOT_SERVED and body[key] not in (None, {}, "", False):
            raise BadRequest(f"{NOT_SERVED[key]}: semreg does not serve Consul Connect or socket services.")
    unknown = [k for k in unknown if k not in NOT_SERVED]
    if unknown:
        raise BadRequest(f"the service definition has no field {unknown[0]}.")
    if body.get("kind") not in (None, "", "typical"):
        raise BadRequest(f"Kind: semreg registers typical services, not {str(body['kind'])[:40]}.")
    name = _text(body, "name", "Name", required=True)
    tags = _tags(body.get("tags"))
    meta = _meta(body.get("meta"))
    out: dict[str, Any] = {
        "id": _text(body, "id", "ID") or name, "service": name,
        "address": _text(body, "address", "Address") or default_address, "port": _port(body.get("port")),
        "tags": semantic(tags, prefixes), "weight": _weight(body.get("weights")),
        "meta": {**meta, TAGS_KEY: kept(tags)} if tags else meta,
        "environment": _text(body, "namespace", "Namespace") or default_environment,
        "ttl": 0, "deregister_after": 0}
    ttl_status = _checks(body, out)
    return Definition(out, ttl_status)


def _text(body: Mapping[str, Any], key: str, name: str, required: bool = False) -> str:
    value = body.get(key)
    if value is None or value == "":
        if required:
            raise BadRequest(f"{name} is required.")
        return ""
    if not isinstance(value, str):
        raise BadRequest(f"{name} must be a string.")
    return value


def _port(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
        raise BadRequest("Port: semreg registers a service at a port from 1 to 65535.")
    return value


def _tags(value: Any) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
        raise BadRequest("Tags must be a list of strings.")
    return list(dict.fromkeys(value))


def _meta(value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise BadRequest("Meta must be an object of strings.")
    reserved = sorted(k for k in value if k.startswith(RESERVED_PREFIX))
    if reserved:
        raise BadRequest(f"Meta: the key {reserved[0][:128]} begins with consul-, which Consul reserves.")
    return dict(value)


def _weight(value: Any) -> int:
    if value is None:
        return 1
    weights = folded(value, "Weights")
    passing = weights.get("passing", 1)
    if isinstance(passing, bool) or not isinstance(passing, int) or not 1 <= passing <= 10_000:
        raise BadRequest("Weights.Passing must be a whole number from 1 to 10000.")
    return passing


def _checks(body: Mapping[str, Any], out: dict[str, Any]) -> str | None:
    """Fill `out`'s lease and active check from `Check` and `Checks`; the TTL check's first status."""
    given: list[Any] = []
    if body.get("check") is not None:
        given.append(body["check"])
    checks = body.get("checks")
    if checks is not None:
        if not isinstance(checks, list):
            raise BadRequest("Checks must be a list of checks.")
        given += checks
    ttl_status: str | None = None
    active = False
    for n, raw in enumerate(given):
        where = "Check" if n == 0 and body.get("check") is not None else f"Checks[{n}]"
        check = folded(raw, where)
        _known(check, where)
        kinds = [k for k in ("ttl", "http", "tcp") if check.get(k) not in (None, "")]
        if len(kinds) != 1:
            raise BadRequest(f"{where}: give one of TTL, HTTP or TCP; semreg runs those three kinds of check.")
        if kinds[0] == "ttl":
            if ttl_status is not None:
                raise BadRequest(f"{where}: semreg keeps one TTL check a service (service:<ID>); this is a second.")
            out["ttl"] = _duration(check, "ttl", where, "TTL", positive=True)
            ttl_status = _status(check.get("status"), where)
        else:
            if active:
                raise BadRequest(f"{where}: semreg runs one HTTP or TCP check a service; this is a second.")
            active = True
            out["check"] = _active(check, kinds[0], where)
        if check.get("deregistercriticalserviceafter") not in (None, ""):
            after = _duration(check, "deregistercriticalserviceafter", where, "DeregisterCriticalServiceAfter")
            out["deregister_after"] = after if not out["deregister_after"] else min(after, out["deregister_after"])
    return ttl_status


def _known(check: Mapping[str, Any], where: str) -> None:
    for key, value in check.items():
        if key in CHECK_NOT_SERVED:
            if value not in (None, "", [], {}, False):
                raise BadRequest(f"{where}.{CHECK_NOT_SERVED[key]}: semreg runs TTL, HTTP (GET) and TCP checks only.")
        elif key not in CHECK_FIELDS:
            raise BadRequest(f"{where} has no field {key}.")
    method = check.get("method")
    if method not in (None, "", "GET"):
        raise BadRequest(f"{where}.Method: semreg's HTTP checks send GET.")


def _active(check: Mapping[str, Any], kind: str, where: str) -> dict[str, Any]:
    target = check[kind]
    if not isinstance(target, str):
        raise BadRequest(f"{where}.{kind.upper()} must be a string.")
    out: dict[str, Any] = {kind: target}
    if check.get("interval") not in (None, ""):
        out["interval"] = _duration(check, "interval", where, "Interval", positive=True)
    elif kind in ("http", "tcp"):
        raise BadRequest(f"{where}.Interval is required with {kind.upper()}, as Consul requires it.")
    if check.get("timeout") not in (None, ""):
        out["timeout"] = _duration(check, "timeout", where, "Timeout", positive=True)
    return out


def _duration(check: Mapping[str, Any], key: str, where: str, name: str, positive: bool = False) -> float:
    value = check[key]
    try:
        seconds = durations.seconds(value)
    except ValueError:
        raise BadRequest(f"{where}.{name} must be a duration such as 10s, 500ms or 1m30s.") from None
    if positive and seconds <= 0:
        raise BadRequest(f"{where}.{name} must be longer than 0s.")
    return seconds


def _status(value: Any, where: str) -> str:
    if value in (None, ""):
        return CRITICAL  # as Consul starts a check until its first update
    if value not in CHECK_STATUSES:
        raise BadRequest(f"{where}.Status takes passing, warning or critical.")
    return str(value)
