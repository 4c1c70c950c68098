# Run by the SPARQL replica (semreg.replica): remove one instance's derived RDF from the registry graph,
# its tag statements and meta entries included, in one transaction. %INSTANCE% is the instance IRI.
PREFIX sr: <https://w3id.org/semreg#>
DELETE WHERE { GRAPH <urn:semreg:registry> { %INSTANCE% sr:tag ?t . ?t ?tp ?to } } ;
DELETE WHERE { GRAPH <urn:semreg:registry> { %INSTANCE% sr:meta ?m . ?m ?mp ?mo } } ;
DELETE WHERE { GRAPH <urn:semreg:registry> { %INSTANCE% ?p ?o } }
