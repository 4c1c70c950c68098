"""RDF terms and syntax: IRIs, CURIEs and tags (`terms`), RDF media types (`media`), `Accept`
negotiation (`negotiation`) and the parsing of uploaded documents (`parsing`; RDF/XML read once by
expat first, so that pyoxigraph's parse stays in bounds: `xml_bounds`).

No state and no I/O beyond parsing bytes handed in. May import: the top-level `semreg.errors`.
Must not import any other room of semreg.
"""
