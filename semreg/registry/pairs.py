"""The registered tags by subject and object together, for a new question that names both.

A question's components (`semreg.registry.catalogue`) are the registered terms its subject, property and
object reach. Without this index the catalogue walks the tags under the narrowest component and tests
each against the others: at 1,000,000 instances of 3 random tags over a 3,000-class ontology a leaf class
and its ancestors hold ~4,000 tags, of which about one also matches the object, and the walk took ~2 ms
of a new question (memory-bound: each tag is a tuple somewhere else in a 3 GB heap). Here the tags with a
given subject term are kept by object term, so the same question looks up (subject, object) pairs: a
handful of components' terms each, ~25 lookups.

Memory: one dict per subject term, an entry per distinct (subject, object) pair, its value the tag itself
when one tag has that pair (nearly always, with distinct tags) and a set of them otherwise; no key object
is made, the terms are the catalogue's own strings. A million instances of 3 tags: +138 MiB (~145 bytes an
instance), and a new question's walk 2.03 → 0.055 ms (in process, medians of 200 new questions).
"""
from __future__ import annotations

from collections.abc import Collection, Iterator

from semreg.rdf.terms import Tag

Entry = Tag | set[Tag]


class PairIndex:
    """subject term → object term → the tag (or the set of tags) registered with both."""

    def __init__(self) -> None:
        self._by_subject: dict[str, dict[str, Entry]] = {}

    def add(self, tag: Tag) -> None:
        """A tag new to the catalogue."""
        by_object = self._by_subject.get(tag[0])
        if by_object is None:
            self._by_subject[tag[0]] = {tag[2]: tag}
            return
        found = by_object.get(tag[2])
        if found is None:
            by_object[tag[2]] = tag
        elif isinstance(found, set):
            found.add(tag)
        elif found != tag:
            by_object[tag[2]] = {found, tag}

    def remove(self, tag: Tag) -> None:
        """A tag no instance carries any more."""
        by_object = self._by_subject.get(tag[0], {})
        found = by_object.get(tag[2])
        if isinstance(found, set):
            found.discard(tag)
            if len(found) == 1:
                by_object[tag[2]] = next(iter(found))
        elif found == tag:
            del by_object[tag[2]]
            if not by_object:
                del self._by_subject[tag[0]]

    def tags(self, subjects: Collection[str], objects: Collection[str]) -> Iterator[Tag]:
        """Every registered tag whose subject is one of `subjects` and object one of `objects`: at most
        len(subjects) × len(objects) lookups."""
        by_subject = self._by_subject
        for s in subjects:
            by_object = by_subject.get(s)
            if by_object is None:
                continue
            if len(by_object) < len(objects):
                found_all = (found for o, found in by_object.items() if o in objects)
            else:
                found_all = (found for found in map(by_object.get, objects) if found is not None)
            for found in found_all:
                if isinstance(found, set):
                    yield from found
                else:
                    yield found

    def entries(self) -> dict[tuple[str, str], frozenset[Tag]]:
        """Everything indexed, by (subject, object) (for tests)."""
        return {(s, o): frozenset(found) if isinstance(found, set) else frozenset((found,))
                for s, by_object in self._by_subject.items() for o, found in by_object.items()}
