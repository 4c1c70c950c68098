"""A discovery question of either form: one pattern (`semreg.registry.discovery.DiscoverQuery`) or several at
once (`semreg.registry.conjunctive.ConjunctiveQuery`). Both are a `semreg.registry.discovery.Query`: what the
coordinator, the shards and routing do with a question (its part, the merge of parts, whether a change is
relevant to it, its text and patterns) is a method of it, and a result's body is its question's
(`DiscoverResult.rendered`). `Question` names the two forms, for what tells them apart (the wire, saved queries).
"""
from __future__ import annotations

from semreg.registry.conjunctive import ConjunctiveQuery
from semreg.registry.discovery import DiscoverQuery

Question = DiscoverQuery | ConjunctiveQuery
