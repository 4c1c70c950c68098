"""An instance: what a service registered, plus its lease and status; its JSON view and record."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from semreg import kept_json
from semreg.rdf.terms import Tag
from semreg.registry.selector import DEFAULT as DEFAULT_ENVIRONMENT
from semreg.timefmt import rfc3339

UP, BLOCKED, DRAINING, CRITICAL = "up", "blocked", "draining", "critical"
STATUSES = (UP, BLOCKED, DRAINING, CRITICAL)


@dataclass(frozen=True, slots=True)
class Registration:
    """What a client registered: immutable; a replacement is a new Registration."""

    id: str
    service: str
    address: str
    port: int
    scheme: str = "http"
    tags: tuple[Tag, ...] = ()
    weight: int = 1
    capacity: int | None = None
    ttl_s: float = 30.0
    deregister_after_s: float = 90.0
    check: dict[str, Any] | None = None
    meta: dict[str, str] = field(default_factory=dict)
    owner: str | None = None
    environment: str = DEFAULT_ENVIRONMENT

    def share_tags(self, tags: tuple[Tag, ...]) -> None:
        """Hold `tags`, equal to its own, instead: the same value made of strings it shares with other
        registrations (`Catalogue.shared`). Nothing that reads a registration can tell the difference."""
        object.__setattr__(self, "tags", tags)

    def record(self) -> dict[str, Any]:
        """The durable form: enough to rebuild the registration exactly."""
        return {"id": self.id, "service": self.service, "address": self.address, "port": self.port,
                "scheme": self.scheme, "tags": [list(t) for t in self.tags], "weight": self.weight,
                "capacity": self.capacity, "ttl": self.ttl_s, "deregister_after": self.deregister_after_s,
                "check": self.check, "meta": self.meta, "owner": self.owner, "environment": self.environment}

    @classmethod
    def from_record(cls, rec: dict[str, Any], terms: dict[str, str] | None = None) -> "Registration":
        """The registration a record holds. With `terms`, the strings of its tags' terms, service, scheme and
        environment are those already in `terms` (the others are added): a million records read at once
        then share a few thousand strings, and each record's own go with it. (Start-up makes a million of
        these: the arguments are positional and the strings looked up without a call of ours; sorting
        300,000 records out took 2.0-3.2 s so, 2.9-4.4 s by keyword through a lambda.)"""
        same = (terms if terms is not None else {}).setdefault
        tags = tuple([_tag(Tag, (same(s, s), same(p, p), same(o, o))) for s, p, o in rec.get("tags", ())])
        service, scheme = rec["service"], rec.get("scheme", "http")
        environment = rec.get("environment") or DEFAULT_ENVIRONMENT
        return cls(rec["id"], same(service, service), rec["address"], int(rec["port"]), same(scheme, scheme), tags,
                   int(rec.get("weight", 1)), rec.get("capacity"), float(rec.get("ttl", 30)),
                   float(rec.get("deregister_after", 90)), rec.get("check"), dict(rec.get("meta") or {}),
                   rec.get("owner"), same(environment, environment))


_tag = tuple.__new__  # a Tag from three strings known to be terms, without its checks


@dataclass(slots=True)
class HealthNote:
    """Why an instance is (or was) in the state it is: its check's last result, and since when it has been
    critical and when it is deleted unless it recovers. Wall-clock seconds, for people. Kept apart from
    `Instance` and made only for an instance with a check or once critical, so that a million instances
    with neither carry one empty slot each, not five."""

    check_passing: bool | None = None
    check_output: str = ""
    check_at_wall: float | None = None
    critical_since_wall: float | None = None
    delete_at_wall: float | None = None  # None: it stays critical until it recovers or is deregistered

    @staticmethod
    def checked(note: HealthNote | None, passing: bool, output: str, wall: float) -> HealthNote:
        note = note or HealthNote()
        note.check_passing, note.check_output, note.check_at_wall = passing, output, wall
        return note

    @staticmethod
    def deleting(note: HealthNote | None, at_wall: float | None) -> HealthNote:
        note = note or HealthNote()
        note.delete_at_wall = at_wall
        return note

    @staticmethod
    def critical(note: HealthNote | None, critical: bool, wall: float) -> HealthNote:
        """Critical from now (`critical`), or no longer: then neither since when nor when it is deleted."""
        note = note or HealthNote()
        note.critical_since_wall = wall if critical else None
        if not critical:
            note.delete_at_wall = None
        return note


@dataclass(slots=True)
class Instance:
    """A registration with its live state. Mutated only by `semreg.registry.registry.Registry`.

    Times are on the registry's monotonic clock (leases run on it); `*_wall` are the same instants as
    wall-clock seconds, for people."""

    reg: Registration
    registered_at: float
    last_heartbeat: float
    expires_at: float | None  # None when ttl is 0
    registered_at_wall: float
    expires_at_wall: float | None
    # up | blocked | draining, as the last heartbeat said; or critical, which the service reported of itself
    # (a Consul TTL check failed, `semreg.consul`): it leaves discovery and is deleted as any critical instance
    admin_status: str = UP
    check_passing: bool = True
    expired: bool = False
    load: float = 0.0
    routes_since_report: int = 0
    revision: int = 1
    state_version: int = 0  # orders status changes of one revision, wherever they were made
    leased: bool = True  # this shard runs its lease and checks (in a cluster, only the first live owner)
    health: HealthNote | None = None
    _view: bytes | None = None
    _view_untagged: bytes | None = None
    _state: tuple[str, int, str] | None = None
    id: str = field(init=False)  # the registration's, as a plain attribute: read on every result

    def __post_init__(self) -> None:
        self.id = self.reg.id

    @property
    def status(self) -> str:
        return CRITICAL if (self.expired or not self.check_passing) else self.admin_status

    def durable(self) -> dict[str, Any]:
        """The durable form: the registration, when it was first registered, the admin status."""
        rec = self.reg.record()
        rec["registered_at"] = self.registered_at_wall
        if self.admin_status != "up":
            rec["admin_status"] = self.admin_status
        return rec

    def invalidate_view(self) -> None:
        self._view = self._view_untagged = None
        self._state = None

    @property
    def state(self) -> tuple[str, int, str]:
        """(id, revision, status): what a watcher of a result holding this instance compares."""
        if self._state is None:
            self._state = (self.reg.id, self.revision, self.status)
        return self._state

    def view(self, tags: bool = True) -> dict[str, Any]:
        """The instance as clients see it; without `tags` its size no longer grows with its tag count."""
        r = self.reg
        out: dict[str, Any] = {"id": r.id, "service": r.service, "environment": r.environment,
                               "address": r.address, "port": r.port, "scheme": r.scheme}
        if tags:
            out["tags"] = [t.as_json() for t in r.tags]
        out.update({"weight": r.weight, "capacity": r.capacity, "ttl": r.ttl_s, "deregister_after": r.deregister_after_s,
                    "check": r.check, "meta": r.meta, "status": self.status, "load": self.load,
                    "expires_at": rfc3339(self.expires_at_wall), "registered_at": rfc3339(self.registered_at_wall)})
        if r.owner is not None:  # the token that registered it (tokens in force): who else may change it
            out["owner"] = r.owner
        note = self.health
        if note is not None and note.check_at_wall is not None:
            out["last_check"] = {"passing": note.check_passing, "output": note.check_output,
                                 "at": rfc3339(note.check_at_wall)}
        if self.status == CRITICAL:  # why, and for how long it stays listed
            out["critical"] = {"lease_lapsed": self.expired, "check_failing": not self.check_passing,
                               "reported": self.admin_status == CRITICAL,
                               "since": rfc3339(note.critical_since_wall) if note else None,
                               "delete_at": rfc3339(note.delete_at_wall) if note else None}
        return out

    def expires_at_text(self) -> str | None:
        return rfc3339(self.expires_at_wall)

    def view_json(self, tags: bool = True) -> bytes:
        """The view, serialised once and kept until the instance changes (the discovery hot path)."""
        if tags:
            if self._view is None:
                self._view = kept_json.dumps(self.view())
            return self._view
        if self._view_untagged is None:
            self._view_untagged = kept_json.dumps(self.view(tags=False))
        return self._view_untagged

