"""Fitting what semreg ships as data from measured collections, offline (`python -m semreg.tune.matchmaker`).

- `matchmaker`: the learned matchmaker's weights (`semreg.registry.matchmaker`), fitted on OWLS-TC 3's development
  half and cross-validated within it.

May import everything below the command line: it sits above the benchmark (it reads the collections the
benchmark reads) and runs the registry in-process, through the same code a server runs, writing the fitted
data into the package. Nothing here runs in a server, and nothing below imports it.
"""
