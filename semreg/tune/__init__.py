"""Fitting what semreg ships as data from measured collections, offline (`python -m semreg.tune.matchmaker`).

Above the benchmark (it reads the collections the benchmark reads) and beside the command line: it runs the
registry in-process, through the same code a server runs, and writes the fitted data into the package.
Nothing here runs in a server.
"""
