"""The JSON bodies of the routes a view of a few of many instances reads (the console's overview and its
live updates): the counts of `GET /v1/summary` and the changes of `GET /v1/changes`, as pydantic models
for `/openapi.json` (kept apart from `semreg.http.schemas`, which holds what requests carry too)."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

Status = Literal["up", "draining", "blocked", "critical"]


class SummaryView(BaseModel):
    instances: int = Field(description="instances in the environments read")
    by_status: dict[Status, int] = Field(description="each status with its count, zeros included")
    services: dict[str, int] = Field(description="each service with its count of instances, by name")
    environments: dict[str, int] = Field(description="each environment read with its count of instances")
    tags: int = Field(description="distinct tags those instances carry")
    ontologies: int = Field(description="ontologies uploaded")
    concepts: int = Field(description="concepts in the reasoner's hierarchy")
    partial: bool | None = Field(None, description="some members did not answer (`missing` names them)")
    missing: list[str] | None = None


class ChangeView(BaseModel):
    id: str
    reason: Literal["registered", "replaced", "deregistered", "expired", "deleted", "status", "renewed", "check",
                    "moved"]
    status: Status | None = Field(description="its status after the change; null once it is gone")
    services: list[str] | None = Field(None, description="its service before and after (left out when the change "
                                                         "also touched an environment the reader may not see)")
    environments: list[str] = Field(description="its environment before and after, of those the reader sees")


class ChangesView(BaseModel):
    changes: list[ChangeView] = Field(description="the changes after `index` the reader may see, oldest first")
    reset: bool = Field(description="read everything again: the changes after `index` are no longer all known "
                                    "(too many, too old, or from before a restart)")


MODELS: list[type[BaseModel]] = [SummaryView, ChangeView, ChangesView]
