"""RDF terms and syntax: IRIs, CURIEs and tags (`terms`), RDF media types (`media`), `Accept`
negotiation (`negotiation`) and the parsing of uploaded documents (`parsing`).

No state and no I/O beyond parsing bytes handed in. May import: the top-level `semreg.errors`.
Must not import any other room of semreg.
"""
