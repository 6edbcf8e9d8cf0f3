"""``streamapp crd``: print the CustomResourceDefinition generated from the models."""

from __future__ import annotations

import argparse
import sys

from .crd import render


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", help="write to this file instead of stdout")


def run(args: argparse.Namespace) -> int:
    text = render()
    if args.output:
        with open(args.output, "w", encoding="utf-8") as handle:
            handle.write(text)
    else:
        sys.stdout.write(text)
    return 0
