"""`semreg bench`: the benchmark program (see `semreg.bench`)."""
from __future__ import annotations

import argparse


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    from semreg import bench

    parser = subparsers.add_parser("bench", help="measure semreg against etcd and the Oxigraph server",
                                   description=bench.DESCRIPTION)
    bench.configure(parser)
