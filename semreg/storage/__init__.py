"""The durable truth in pyoxigraph: the records of instances, ontologies, prefixes and saved queries,
written before a request is acknowledged, and the same data as RDF behind them.

- `store`: the records, written transactionally before a request is acknowledged, and read at start-up.
- `handle`: the pyoxigraph store a `Store` works on, opened again now and then to give RocksDB's caches back.
- `documents`: an instance record's document, and reading every one back at start-up.
- `ontology_meta`: what an ontology's record says of it besides its document.
- `vocabulary`: the registry vocabulary (`sr:`), an instance as RDF.
- `at_rest`: the data directory as a plain RDF dataset, written on a thread of its own behind the records.
- `rdf_writes`: how that RDF is written: small transactions in the gaps between the acknowledged writes.
- `registrations`: registrations read back from their RDF (a backup restored, records rebuilt).
- `snapshot`: the registry as it was at a clean stop, read at the next start-up while the records match it.
- `warm`: the data directory's tables read in order once at start-up, so what follows comes from memory.
- `backup`: a backup file, one gzipped N-Quads document any triple store can load.
- `backup_reading`: a backup read as it streams in, in memory that does not grow with the file.
- `lines`: a backup's bytes inflated into lines as they arrive, held to the limits on size and line length.
- `spill`: items put aside in order, in memory up to a few MiB and then in a temporary file.

May import: `semreg.rdf` and the top-level modules (`errors`, `timefmt`). Must not import reasoning,
the registry, SPARQL, the cluster or HTTP: everything above reads and writes through it.
"""
