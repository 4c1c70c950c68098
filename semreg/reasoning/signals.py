"""What the learned matchmaker (`semreg.registry.matchmaker`) reads of a registered term against a queried one.

Each in [0, 1], from the similarity index (`semreg.reasoning.similarity`): the two parts of the similarity (the
text similarity of the unfolded definitions, the structural similarity over the closure) and the approximated
subsumption, as iSeM approximates it: how much of the queried concept's definition (the concept and its
ancestors) the registered one lacks (`given_up`: what must be given up of the query for the registered term to
be below it) and how much of the registered concept's the query lacks (`assumed`: what must be assumed of the
query for it to be below the registered term). A concept below the query gives up nothing; one above it
assumes nothing; equivalent terms, or a wildcard on either side, are `SAME`.
"""
from __future__ import annotations

from dataclasses import dataclass

from semreg.rdf.terms import ANY
from semreg.reasoning.similarity import SimilarityIndex


@dataclass(frozen=True, slots=True)
class Signals:
    text: float
    structure: float
    given_up: float
    assumed: float


SAME = Signals(1.0, 1.0, 0.0, 0.0)


def signals(index: SimilarityIndex, queried: str, registered: str) -> Signals:
    """The signals of `registered` against `queried`."""
    if queried == ANY or registered == ANY or index.hierarchy.is_equivalent(queried, registered):
        return SAME
    given_up, assumed = index.subsumption(queried, registered)
    return Signals(index.text(queried, registered), index.structure(queried, registered)[0], given_up, assumed)
