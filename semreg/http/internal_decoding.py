"""What a node-to-node request (`semreg.http.internal`) says, decoded into the typed values a shard is called with.

`decoded(make)` is the one place where a shape error (a key missing, a value of another type, a number that is
not one) becomes a 400, "a malformed node-to-node request": the sender's fault. A handler decodes the whole
request before it calls the shard, so a malformed request changes nothing; whatever the shard call raises
then is this member's own failure, left to the app's handler of unexpected errors (500, logged), which the
sender takes for a member failing (`ShardUnavailable`, `semreg.cluster.peer`), not for its client's fault.

The helpers below raise `TypeError` or `ValueError` for a value of another shape, for `decoded` to answer.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypeVar

from semreg.errors import BadRequest
from semreg.registry.instances import STATUSES, Registration
from semreg.registry.shard import Record, State

T = TypeVar("T")

SHAPE_ERRORS = (KeyError, IndexError, TypeError, ValueError, AttributeError)


def decoded(make: Callable[[], T]) -> T:
    """`make()`, the decoding of (part of) a request; a shape error it raises is a 400."""
    try:
        return make()
    except SHAPE_ERRORS as exc:
        raise BadRequest(f"a malformed node-to-node request: {type(exc).__name__}: {exc}"[:300]) from exc


def text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, not {type(value).__name__}")
    return value


def optional_text(value: Any) -> str | None:
    return None if value is None else text(value)


def texts(value: Any) -> list[str]:
    """A JSON list of strings (ids)."""
    if not isinstance(value, list):
        raise TypeError(f"expected a list, not {type(value).__name__}")
    return [text(v) for v in value]


def number(value: Any) -> float:
    """A finite JSON number, as sent (an integer stays one)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise TypeError(f"expected a number, not {str(value)[:40]}")
    return value


def seconds(value: str) -> float:
    """A duration a parameter gives (`inf` is a long one; `nan` none)."""
    found = float(value)
    if math.isnan(found):
        raise ValueError("expected a number of seconds, not nan")
    return found


def admin_status(value: Any) -> str | None:
    """An admin status, or None (unchanged)."""
    if value is not None and value not in STATUSES:
        raise ValueError(f"a status is one of {', '.join(STATUSES)}, not {str(value)[:40]}")
    return value


def view(body: Any) -> tuple[int, int] | None:
    """The sender's view a write carries ([member list revision, ring checksum]; none from a node that sends
    none), for `Cluster.admit`."""
    sender = body.get("view")
    if not sender:
        return None
    return int(sender[0]), int(sender[1])


def registration(rec: Any) -> Registration:
    """The registration a record holds (`Registration.from_record`), each field of the type it is stored with."""
    reg = Registration.from_record(rec)
    for value in (reg.id, reg.service, reg.address, reg.scheme, reg.environment,
                  *(term for tag in reg.tags for term in tag), *reg.meta, *reg.meta.values()):
        text(value)
    optional_text(reg.owner)
    if reg.capacity is not None and (isinstance(reg.capacity, bool) or not isinstance(reg.capacity, int)):
        raise TypeError(f"a capacity is an integer, not {str(reg.capacity)[:40]}")
    if reg.check is not None:
        if not isinstance(reg.check, dict):
            raise TypeError(f"a check is an object, not {type(reg.check).__name__}")
        float(reg.check.get("interval", 0.0))  # read as the check is scheduled
    return reg


def record(item: Any) -> Record:
    """A durable record with its revision, as another owner hands it over (`LocalShard.restore_records`): a
    tombstone (`deleted`) names an instance; any other record holds a registration, with its admin status and
    registration time."""
    rec, revision = item
    if not isinstance(rec, dict):
        raise TypeError(f"a record is an object, not {type(rec).__name__}")
    text(rec["id"])
    if not rec.get("deleted"):
        registration(rec)
        admin_status(rec.get("admin_status"))
        if rec.get("registered_at") is not None:
            number(rec["registered_at"])
    return rec, int(revision)


def state(item: Any) -> State:
    """An instance's status as its lease's owner sends it (`semreg.registry.shard.State`)."""
    held_status = admin_status(item[3])
    if held_status is None:
        raise ValueError("a state names its admin status")
    return text(item[0]), int(item[1]), int(item[2]), held_status, bool(item[4]), bool(item[5])
