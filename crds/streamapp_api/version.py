"""The version of streamapp: the one place it is written. pyproject.toml reads it (setuptools'
dynamic version), so does `make images` (the image tags) and every command's ``--version``; the
chart's appVersion is checked against it (tests/chart)."""

from __future__ import annotations

import argparse

__version__ = "0.2.0"


def add_version_argument(parser: argparse.ArgumentParser) -> None:
    """``--version``: prints "<prog> <version>" and exits 0."""
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
