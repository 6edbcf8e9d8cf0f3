"""The operator's default object-storage checkpoint (``--default-checkpoint-location`` and friends; the
chart's ``checkpoint.*`` values): apps that name neither a location nor a volume keep their
checkpoints there, so a cluster without ReadWriteMany storage needs none."""

from __future__ import annotations

import argparse
import os
import re

from streamapp_api.checkpoint import S3_LOCATION_HELP, S3_LOCATION_PATTERN, CheckpointDefault

_ENV = "STREAMAPP_OPERATOR_DEFAULT_CHECKPOINT_"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("default checkpoint location (docs/operator.md, 'Checkpoints')")
    group.add_argument("--default-checkpoint-location", metavar="S3A_URI", default=os.environ.get(f"{_ENV}LOCATION"),
                       help="object-store checkpoints for apps that name neither spec.state.checkpoint.location nor "
                            "a volume field, e.g. s3a://bucket/streamapps/{namespace}/{name} ({namespace} and {name} "
                            "become the app's); default: a volume")
    group.add_argument("--default-checkpoint-s3-endpoint", metavar="URL", default=os.environ.get(f"{_ENV}S3_ENDPOINT"),
                       help="endpoint of an S3-compatible store (default: AWS S3)")
    group.add_argument("--default-checkpoint-s3-region", metavar="REGION", default=os.environ.get(f"{_ENV}S3_REGION"))
    group.add_argument("--default-checkpoint-s3-path-style", action="store_true",
                       default=os.environ.get(f"{_ENV}S3_PATH_STYLE", "") == "true",
                       help="address buckets as endpoint/bucket (most S3-compatible stores)")
    group.add_argument("--default-checkpoint-s3-secret", metavar="NAME", default=os.environ.get(f"{_ENV}S3_SECRET"),
                       help="Secret with AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, looked up in each app's own "
                            "namespace (default: S3A's credential chain, e.g. pod identity)")


def from_arguments(args: argparse.Namespace) -> CheckpointDefault | None:
    """The default, or None without --default-checkpoint-location. ValueError names a malformed option."""
    location = args.default_checkpoint_location
    if not location:
        return None
    if not re.match(S3_LOCATION_PATTERN, location.replace("{namespace}", "ns").replace("{name}", "app")):
        raise ValueError(f"--default-checkpoint-location {location!r}: expected {S3_LOCATION_HELP}")
    if "{name}" not in location:
        raise ValueError(f"--default-checkpoint-location {location!r}: needs {{name}} (and {{namespace}} when apps "
                         "of several namespaces share the bucket), or every app would share one checkpoint")
    s3: dict = {}
    if args.default_checkpoint_s3_endpoint:
        s3["endpoint"] = args.default_checkpoint_s3_endpoint
    if args.default_checkpoint_s3_region:
        s3["region"] = args.default_checkpoint_s3_region
    if args.default_checkpoint_s3_path_style:
        s3["pathStyleAccess"] = True
    if args.default_checkpoint_s3_secret:
        s3["secretRef"] = {"name": args.default_checkpoint_s3_secret}
    return CheckpointDefault(location, s3 or None)
