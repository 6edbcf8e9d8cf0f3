"""``python -m streamapp_operator``: run the operator (kopf) with its metrics on their own port."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from datetime import timedelta

from streamapp_api.version import add_version_argument


def few_malloc_arenas(arenas: int = 2) -> None:
    """Like MALLOC_ARENA_MAX=2 (unless that is set): glibc gives each of the operator's ~100 threads
    (mostly waiting on the API server) an arena that keeps freed memory, RSS that grows with the apps
    (bench/README.md, "Control plane"). Must run before the threads start."""
    if "MALLOC_ARENA_MAX" in os.environ:
        return
    try:
        import ctypes

        ctypes.CDLL(None).mallopt(-8, arenas)  # M_ARENA_MAX
    except (OSError, AttributeError):  # not glibc
        pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m streamapp_operator", description=__doc__)
    add_version_argument(parser)
    parser.add_argument("-n", "--namespace", action="append", default=[],
                        help="watch only this namespace (repeatable); default: the whole cluster")
    parser.add_argument("--metrics-port", type=int, default=int(os.environ.get("STREAMAPP_OPERATOR_METRICS_PORT", "8080")),
                        help="port of the operator's Prometheus metrics (0: off)")
    parser.add_argument("--metrics-address", default="0.0.0.0")
    parser.add_argument("--runtime-image", default=os.environ.get("STREAMAPP_RUNTIME_IMAGE"),
                        help="runtime image for apps without spec.image")
    parser.add_argument("--resync", type=float, default=float(os.environ.get("STREAMAPP_OPERATOR_RESYNC", "30")),
                        help="seconds between periodic reconciles of each app (partition counts, status)")
    parser.add_argument("--scale-debounce", type=float, default=60.0,
                        help="seconds a partition-driven executor count must hold before the app is rescaled to it")
    parser.add_argument("--rescale-timeout", type=float, default=60.0,
                        help="seconds a Ready driver has to apply a rescale in place before it is restarted with the count")
    election = parser.add_argument_group("leader election (several replicas: one reconciles, every one serves the webhook)")
    election.add_argument("--leader-election", metavar="NAMESPACE/NAME",
                          help="the coordination.k8s.io Lease the replicas elect their leader by; default: none, this "
                          "replica reconciles (run only one)")
    election.add_argument("--leader-election-lease-duration", type=int, default=15, metavar="SECONDS",
                          help="a replica takes a Lease its holder has not renewed for this long")
    election.add_argument("--leader-election-renew-deadline", type=int, default=10, metavar="SECONDS",
                          help="the leader stops (its process ends) when it could not renew the Lease for this long")
    election.add_argument("--leader-election-retry-period", type=int, default=2, metavar="SECONDS",
                          help="how often the leader renews the Lease and the others try to take it")
    parser.add_argument("--liveness", default=None, help="kopf liveness endpoint, e.g. http://0.0.0.0:8081/healthz")
    parser.add_argument("--policy", metavar="FILE", default=os.environ.get("STREAMAPP_OPERATOR_POLICY"),
                        help="what apps may run on this cluster (YAML: images, sparkConf, functions, kafkaOptions; "
                        "docs/security.md); default: the safe defaults")
    webhook = parser.add_argument_group("admission webhook (off unless --webhook-port is given)")
    webhook.add_argument("--webhook-port", type=int, default=0, help="serve the validating webhook (HTTPS) on this port")
    webhook.add_argument("--webhook-address", default="0.0.0.0", help="address the webhook listens on")
    webhook.add_argument("--webhook-service", metavar="NAME.NAMESPACE",
                         help="the webhook's Service: the DNS names of the certificate the operator makes")
    webhook.add_argument("--webhook-host", action="append", default=[], metavar="NAME_OR_IP",
                         help="another name or IP the API server reaches the webhook by (repeatable)")
    webhook.add_argument("--webhook-configuration", metavar="NAME",
                         help="ValidatingWebhookConfiguration to put the operator's CA into (not with --webhook-cert-dir)")
    webhook.add_argument("--webhook-ca-secret", metavar="NAMESPACE/NAME",
                         help="Secret the replicas share the webhook's CA by (made by the first that finds none); "
                         "default: a CA of this process's own (one replica only)")
    webhook.add_argument("--webhook-cert-dir", metavar="DIR",
                         help="tls.crt and tls.key (e.g. from cert-manager) instead of a certificate the operator makes")
    parser.add_argument("-v", "--verbose", action="store_true")
    from . import checkpoint_default
    from .render import network, ui

    network.add_arguments(parser)
    ui.add_arguments(parser)
    checkpoint_default.add_arguments(parser)
    args = parser.parse_args(argv)
    from .leader import LeaseTimes, parse_lease

    times = LeaseTimes(args.leader_election_lease_duration, args.leader_election_renew_deadline,
                       args.leader_election_retry_period)
    if args.leader_election and (problems := times.problems()):
        parser.error("; ".join(problems))
    secret = (args.webhook_ca_secret or "namespace/name").split("/")
    if len(secret) != 2 or not all(secret):
        parser.error(f"--webhook-ca-secret {args.webhook_ca_secret!r}: expected NAMESPACE/NAME")
    try:
        if args.leader_election:
            parse_lease(args.leader_election)
        network_policies = network.from_arguments(args)
        spark_ui = ui.from_arguments(args)
        default_checkpoint = checkpoint_default.from_arguments(args)
    except ValueError as exc:
        parser.error(str(exc))
    few_malloc_arenas()

    import kopf

    from streamapp_api import InvalidSpec, Policy

    from . import handlers, names
    from .decide.world import Settings
    from .report import metrics
    from .webhook import WebhookOptions, enable

    try:
        policy = Policy.from_file(args.policy) if args.policy else Policy()
    except (OSError, InvalidSpec) as exc:
        parser.error(f"--policy {args.policy}: {exc}")

    if os.environ.get("STREAMAPP_OPERATOR_TRACEMALLOC"):
        from .report.memory import trace_to

        trace_to(os.environ["STREAMAPP_OPERATOR_TRACEMALLOC"])
    kopf.configure(verbose=args.verbose)
    logging.getLogger("kubernetes").setLevel(logging.WARNING)
    settings = Settings(
        default_image=args.runtime_image or names.DEFAULT_RUNTIME_IMAGE,
        scale_debounce=timedelta(seconds=args.scale_debounce),
        rescale_timeout=timedelta(seconds=args.rescale_timeout),
        policy=policy,
        network=network_policies,
        checkpoint=default_checkpoint,
        ui=spark_ui,
    )
    if args.webhook_port:
        enable(policy, WebhookOptions(port=args.webhook_port, address=args.webhook_address, service=args.webhook_service,
                                      hosts=tuple(args.webhook_host), configuration=args.webhook_configuration,
                                      cert_dir=args.webhook_cert_dir, ca_secret=args.webhook_ca_secret))
    if args.metrics_port:
        metrics.serve(args.metrics_port, args.metrics_address)
    kopf.run(
        standalone=True,  # not kopf's peering: a Lease (docs/operator.md, "Replicas and leader election")
        namespaces=args.namespace,
        clusterwide=not args.namespace,
        liveness_endpoint=args.liveness,
        memo=handlers.operator_memo(settings, args.resync, (args.leader_election, times) if args.leader_election else None,
                                    scan=handlers.needs_scanning(args.namespace)),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
