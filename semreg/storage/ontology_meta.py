"""What an ontology's record says of it besides its document: its counts, when and as what it was uploaded."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class OntologyMeta:
    name: str
    triples: int
    inferred: int  # entailed triples the upload added to the closure of the ontologies already there
    uploaded_at: str
    media_type: str
    prefixes: dict[str, str]
    sha256: str = ""

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "triples": self.triples, "inferred": self.inferred,
                "uploaded_at": self.uploaded_at, "media_type": self.media_type}
