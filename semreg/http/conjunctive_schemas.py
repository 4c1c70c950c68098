"""The JSON bodies of conjunctive discovery (`POST /v1/discover` with `all`): the question, and the answer in the
shape of `GET /v1/discover`'s, each match with its `patterns` (kept apart from `semreg.http.schemas`, as the
console's are)."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from semreg.http.schemas import WARNINGS, BestMatch, InstanceRef, InstanceView, TagInput, TagView, TermWarningView

MATCH = Field(default=None, description="degrees, as GET /v1/discover's match: a comma list or a list of exact, "
                                        "narrower, broader, overlap, similar; or all, with similar or not (default "
                                        "exact,narrower)")


class ConjunctiveBody(BaseModel):
    """A question of several patterns, each of which an instance must match with some tag."""

    model_config = ConfigDict(extra="forbid")
    all: list[TagInput] = Field(description="1-64 patterns, each of which the instance must match with some tag")
    provided: list[TagInput] | None = Field(default=None, description=(
        "1-64 tags the caller can supply, each with a predicate: every tag of the instance whose predicate is, or "
        "is below, a provided tag's predicate must be equal to or broader than some provided tag"))
    match: str | list[str] | None = MATCH
    min_similarity: float | None = Field(default=None, description=(
        "with similar in match: the floor of a similar match's similarity, in [0, 1] (default 0.3)"))
    rank: Literal["degree", "score"] | None = Field(default=None, description=(
        "degree (the default): by degree, then, with similar asked, the matchmaker's score; score (with similar "
        "only): by the learned matchmaker's score alone, the degrees mixed"))
    limit: int | None = Field(default=None, description="at most this many instances")
    environment: str | None = Field(default=None, max_length=256, description="default 'default'; '*' for all")
    meta: dict[str, str] = Field(default_factory=dict, description="KEY: VALUE filters, all of which must hold")
    service: str | None = Field(default=None, max_length=256, description="only this service's instances")
    status: Literal["up", "any"] | None = Field(default=None, description="'any': every status (default up)")
    tags: bool = Field(default=False, description="views with their tags")

    def fields(self) -> dict[str, Any]:
        """The body as the domain's parser reads it (`semreg.registry.query_params.conjunctive_query`)."""
        found = self.model_dump()
        if isinstance(found["match"], list):
            found["match"] = ",".join(found["match"])
        return found


class ConjunctiveMatch(BestMatch):
    """`tag`, `degree`, `distance`: the worst-matched pattern's tag, the worst degree, the summed distance."""

    patterns: list[BestMatch] = Field(description="each pattern's own match, in the order of all")
    provided: float | None = Field(default=None, description=(
        "with similar asked and provided given: how nearly the provided tags cover the instance's needed tags, "
        "in [0, 1] (provided then ranks instead of filtering)"))
    score: float | None = Field(default=None, description=(
        "with similar asked: the learned matchmaker's score in [0, 1], what ranks the instances of a degree (or "
        "every instance, with rank=score)"))
    signals: dict[str, float] | None = Field(default=None, description=(
        "with similar asked, in matches (not on the instances' views): what the matchmaker scored: the degree "
        "(one-hot), the distance, the patterns' text and structural similarity and approximated subsumption "
        "(given_up, assumed), how provided fits (provided, covered) and the needed tags' signals against what is "
        "provided (input_*)"))


class ConjunctiveMatchView(ConjunctiveMatch):
    instances: list[InstanceRef]


class ConjunctiveRankedView(InstanceView):
    match: ConjunctiveMatch


class ConjunctiveQueryView(BaseModel):
    all: list[TagView]
    provided: list[TagView] | None = Field(default=None, description="left out when the question gave none")


class ConjunctiveView(BaseModel):
    query: ConjunctiveQueryView
    matches: list[ConjunctiveMatchView] = Field(description="the combined matches, best first, each naming its "
                                                            "instances by id")
    truncated: bool = Field(description="true when more combined matches were found than the 1,000 listed")
    instances: list[ConjunctiveRankedView] = Field(description="each instance once, ranked, with its match")
    warnings: list[TermWarningView] | None = WARNINGS


MODELS: list[type[BaseModel]] = [ConjunctiveBody, ConjunctiveMatch, ConjunctiveMatchView, ConjunctiveRankedView,
                                 ConjunctiveQueryView, ConjunctiveView]
