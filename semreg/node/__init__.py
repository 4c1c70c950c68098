"""A node: its parts wired (`node`), and the lifecycle they are to run under (`services`: a service, and the
manager that starts services after the ones they need, gives the start-up up when a stop is asked, and stops them
in reverse, each within a bound).

May import every room but `cli` and `bench`; only the HTTP app factory imports it.
"""
from semreg.node.node import RELEASE_EVERY_S, TRIM_EVERY_S, Node

__all__ = ["RELEASE_EVERY_S", "TRIM_EVERY_S", "Node"]
