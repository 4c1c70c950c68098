"""semreg: a semantic service registry.

Services register what they handle as RDF triple patterns; consumers ask in ontology terms and the
server's reasoner expands the question over the class and property hierarchies.
"""

__version__ = "0.1.0"
