"""The JSON view of an instance (`semreg.registry.instances.Instance.view`) as pydantic models for
`/openapi.json`, with what it says of its health: its check's last result, and why it is critical while it
is (`semreg.registry.instances.HealthNote` is what these show)."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field


class TagView(BaseModel):
    s: str
    p: str
    o: str


class LastCheckView(BaseModel):
    passing: bool
    output: str = Field(description="what the probe said: `HTTP 503`, `TCP connect ok`, `ConnectionRefusedError: ...`")
    at: str = Field(description="when it ran (RFC 3339, UTC)")


class CriticalView(BaseModel):
    lease_lapsed: bool = Field(description="its ttl passed without a heartbeat (`expires_at` says when)")
    check_failing: bool = Field(description="its check's last result failed (`last_check` says how)")
    reported: bool = Field(default=False, description="the service reported itself critical (a Consul TTL check "
                                                      "failed through --consul-listen)")
    since: str | None = Field(description="when it became critical (RFC 3339, UTC)")
    delete_at: str | None = Field(description="when it is deleted unless it recovers (`deregister_after` past its "
                                              "last heartbeat); null: it stays until it recovers or is deregistered")


class InstanceView(BaseModel):
    id: str
    service: str
    environment: str
    address: str
    port: int
    scheme: str
    tags: list[TagView] | None = Field(default=None, description="left out of discovery answers unless tags=true")
    weight: int
    capacity: int | None
    ttl: float
    deregister_after: float
    check: dict[str, Any] | None
    meta: dict[str, str]
    status: Literal["up", "blocked", "draining", "critical"]
    load: float
    expires_at: str | None
    registered_at: str | None
    owner: str | None = Field(default=None, description="the name of the token that registered it, when tokens "
                                                         "are in force (only it or an admin may change it)")
    last_check: LastCheckView | None = Field(default=None, description="its check's last result, once it ran")
    critical: CriticalView | None = Field(default=None, description="why it is critical (left out unless it is)")


MODELS: list[type[BaseModel]] = [LastCheckView, CriticalView]  # InstanceView: with the others, in `schemas`
