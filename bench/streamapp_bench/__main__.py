"""`python -m streamapp_bench`: run the benches, write bench/results/<name>.json, render bench/README.md.

Each bench starts the test bed parts it needs and stops them when it ends; recovery and autoscale
bring up the kind cluster themselves (streamapp_testbed.kind_cluster.bed). Adding one is a module with
`run(bed, workdir, **options) -> dict`, an entry in BENCHES and a renderer in report.RENDER.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from datetime import datetime, timezone
from pathlib import Path

from streamapp_testbed import bed, netguard
from streamapp_testbed.paths import REPO_DIR, versions

from . import autoscale, controlplane, dataplane, delivery, kstreams, realtime, recovery, report, state_functions

BENCH_DIR = REPO_DIR / "bench"
# name -> (test bed parts, how to run it with the parsed arguments)
BENCHES = {
    "dataplane": (("kafka", "postgres", "schema-registry"), lambda tb, wd, a: dataplane.run(
        tb, wd, n=a.n, partitions=a.partitions, live_seconds=a.live_seconds, max_offsets=a.max_offsets or max(a.n // 50, 1000),
        users=a.users, timeout=a.timeout, rounds_of_each=a.rounds, min_seconds=a.min_seconds, only=a.engines,
        warm_seconds=a.warm_seconds, results=a.results,
        first_n=dataplane.previous_sizes(a.results / "dataplane.json", a.n, a.min_seconds))),
    # delivery exactly-once against at-least-once on the Kafka sink (issue 19)
    "delivery": (("kafka",), lambda tb, wd, a: delivery.run(
        tb, wd, n=a.delivery_n, partitions=a.partitions, max_offsets=max(a.delivery_n // 30, 1000), users=a.users,
        repeats=a.rounds, live_seconds=a.live_seconds, warm_seconds=a.warm_seconds, timeout=a.timeout)),
    # issue 17: a stateless Kafka → Kafka app at a fixed rate, micro-batches against trigger: realtime
    "realtime": (("kafka",), lambda tb, wd, a: realtime.run(
        tb, wd, rate=a.realtime_rate, seconds=a.realtime_seconds, rounds=a.rounds, partitions=a.partitions,
        timeout=min(a.timeout, 300), results=a.results)),
    # issue 17 §1: applyInPandasWithState (accumulate, table joins today) against transformWithState
    "statefns": (("kafka",), lambda tb, wd, a: state_functions.run(
        tb, wd, n=a.statefns_n, rounds=a.rounds, partitions=a.partitions, timeout=a.timeout)),
    "controlplane": (("kafka", "kube", "kwok"), lambda tb, wd, a: controlplane.run(
        tb, wd, total=a.apps, batch=a.batch, fail=a.fail, settle=a.settle, timeout=a.timeout,
        profile_seconds=a.profile_seconds)),
    # the kind cluster (brought up and down here unless `make kind-up` left one up)
    "recovery": ((), lambda tb, wd, a: recovery.run(tb, wd, kills=a.kills, timeout=a.timeout, results=a.results)),
    # issue 15: load mode through a ×4 input step, in-place rescale against a driver restart (kind too)
    "autoscale": ((), lambda tb, wd, a: autoscale.run(
        tb, wd, methods=a.rescale_methods, rounds=a.autoscale_rounds, rate=a.autoscale_rate, work=a.autoscale_work,
        trigger=a.autoscale_trigger,
        base_s=a.autoscale_phases[0], step_s=a.autoscale_phases[1], back_s=a.autoscale_phases[2],
        timeout=min(a.timeout, 300), results=a.results)),
}
# What `make bench` runs when no bench is named (bench/README.md, "How long"); delivery (≈ 10 min),
# autoscale (≈ 18 min) and statefns (≈ 8 min) run when named, or with "all".
DEFAULT_BENCHES = ("dataplane", "realtime", "controlplane", "recovery")
# --quick: a developer's run of the same code in minutes (small inputs, 2 rounds, short phases), its
# results and figures kept apart from the project's (bench/results-quick/, with a README of its own).
QUICK = {"n": 500_000, "rounds": 2, "realtime_seconds": 10, "statefns_n": 50_000, "min_seconds": 5, "live_seconds": 10, "warm_seconds": 5, "delivery_n": 200_000, "apps": 200,
         "fail": 20, "settle": 10, "profile_seconds": 0, "kills": 1, "autoscale_phases": (20, 60, 30),
         "results": BENCH_DIR / "results-quick"}


def machine() -> dict:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    mem = next(int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemTotal"))
    return {"cpus": os.cpu_count(), "cpu": cpu, "memory_gib": round(mem / 1024 / 1024), "os": platform.platform(terse=True),
            "load_at_start": " ".join(f"{x:.1f}" for x in os.getloadavg())}


def software() -> dict:
    import kopf
    import pyspark

    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()[0]
    v = versions()
    return {"Kafka": v["KAFKA_VERSION"], "Kafka Streams": v["KAFKA_VERSION"], "Spark (pyspark)": pyspark.__version__,
            "Kubernetes": v["KUBE_VERSION"], "kwok": v["KWOK_VERSION"], "kopf": kopf.__version__,
            "Python": platform.python_version(), "Java": java.split('"')[1] if '"' in java else java}


def quick_options() -> str:
    text = lambda v: ",".join(map(str, v)) if isinstance(v, tuple) else str(v)  # noqa: E731
    return " ".join(f"--{k.replace('_', '-')} {text(v)}" for k, v in QUICK.items() if k != "results")


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m streamapp_bench", description=__doc__.splitlines()[0])
    p.add_argument("benches", nargs="*", metavar="BENCH",
                   help=f"any of {', '.join(BENCHES)}, or all (default: {', '.join(DEFAULT_BENCHES)})")
    p.add_argument("--quick", action="store_true",
                   help=f"a developer's run in minutes: {quick_options()} unless given; results in "
                        f"{QUICK['results'].relative_to(REPO_DIR)}/ with a README of their own")
    p.add_argument("--rounds", "--repeats", type=int, default=3,
                   help="dataplane and delivery: runs of each engine, interleaved (a, b, c, a, b, c, …)")
    # 5,000,000: what the Spark engines need to write output for --min-seconds (on 3,000,000 each one's
    # first run was only a sizing run, made again on 5,000,000: ~2 min of the bench)
    p.add_argument("--n", type=int, default=5_000_000, help="events in the data-plane backlog")
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--delivery-n", type=int, default=1_000_000, help="events in the delivery bench's backlog")
    p.add_argument("--users", type=int, default=5000, help="concurrent users of the generator")
    p.add_argument("--max-offsets", type=int, default=0, help="Spark maxOffsetsPerTrigger (default N/50: 100,000, the batch of every data-plane figure so far)")
    p.add_argument("--engines", type=lambda text: tuple(e for e in text.split(",") if e), default=(),
                   help="data plane: measure only the sustained rate of these, comma-separated (runtime, runtime-nodlq, runtime-avro, "
                        "handwritten, handwritten-plain, kstreams, raw); no latency or DB-write runs")
    p.add_argument("--live-seconds", type=float, default=20, help="measured seconds of each fixed-rate latency run")
    p.add_argument("--warm-seconds", type=float, default=dataplane.WARM_SECONDS,
                   help="data plane, delivery: seconds at the fixed rate before the measured ones (not measured)")
    p.add_argument("--min-seconds", type=float, default=30,
                   help="data plane: an engine whose first run at N wrote output for less than this runs every round "
                        "on a larger backlog; the raw consumer reads the topic again until this long")
    p.add_argument("--realtime-rate", type=float, default=10_000, help="realtime: events/s produced")
    p.add_argument("--realtime-seconds", type=float, default=30, help="realtime: seconds produced at that rate per run")
    p.add_argument("--statefns-n", type=int, default=200_000, help="statefns: records in the backlog")
    p.add_argument("--apps", type=int, default=1000)
    p.add_argument("--batch", type=int, default=100)
    p.add_argument("--fail", type=int, default=100)
    p.add_argument("--settle", type=float, default=30, help="seconds of steady state measured at the first and last batch")
    # Off unless asked for: py-spy on the last batch slows that batch and the failure p99, the bench's
    # own bars (bench/README.md, "Control plane").
    p.add_argument("--profile-seconds", type=float, default=0,
                   help="control plane: py-spy over the operator from its last batch, for this many seconds "
                        "(a diagnosis: it slows what it watches)")
    p.add_argument("--kills", type=int, default=3, help="recovery: driver kills measured")
    p.add_argument("--rescale-methods", type=lambda text: tuple(m for m in text.split(",") if m),
                   default=autoscale.METHODS, help="autoscale: spec.scaling.rescale of each run, in order")
    p.add_argument("--autoscale-rounds", type=int, default=1, help="autoscale: runs of each method, interleaved")
    p.add_argument("--autoscale-rate", type=float, default=800, help="autoscale: records/s before and after the ×4 step")
    p.add_argument("--autoscale-work", type=int, default=4000, help="autoscale: CPU per record (repeat count hashed)")
    p.add_argument("--autoscale-trigger", default="4s", help="autoscale: the app's trigger interval")
    p.add_argument("--autoscale-phases", type=lambda text: tuple(float(x) for x in text.split(",")), default=(45, 180, 90),
                   help="autoscale: seconds of base, ×4 and back")
    p.add_argument("--timeout", type=float, default=900, help="per engine run / per wait")
    p.add_argument("--results", type=Path, default=BENCH_DIR / "results")
    p.add_argument("--readme", type=Path, default=None,
                   help="'-': do not render (default: bench/README.md; with --quick, README.md in the results folder)")
    p.add_argument("--keep-workdir", action="store_true", help="keep each bench's work folder (operator log, profile)")
    args = p.parse_args(argv)
    if args.quick:  # the quick values where the command line gave none
        p.set_defaults(**QUICK)
        args = p.parse_args(argv)
    if args.readme is None:
        args.readme = args.results / "README.md" if args.quick else BENCH_DIR / "README.md"
    unknown = set(args.benches) - set(BENCHES) - {"all"}
    if unknown:
        p.error(f"unknown bench {', '.join(sorted(unknown))}; known: {', '.join(BENCHES)}, all")
    args.benches = list(BENCHES) if "all" in args.benches else args.benches or list(DEFAULT_BENCHES)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s", stream=sys.stderr)
    args.results.mkdir(parents=True, exist_ok=True)
    command = os.environ.get("STREAMAPP_BENCH_COMMAND") or "python -m streamapp_bench " + shlex.join(argv or sys.argv[1:])
    if "dataplane" in args.benches:
        kstreams.build()  # may download from Maven Central: before the guard (make deps has done it already)
    # No packet of a bench leaves this machine: every attempt is dropped, named, and fails the run.
    guard = netguard.KernelGuard(netguard.run_id()).start()
    try:
        run_benches(args, command, guard)
    finally:
        passed, text = netguard.report(guard.stop(), guard.run_id)
        print(text, file=sys.stderr)
    if str(args.readme) != "-":
        report.update_readme(args.readme, args.results)
    return 0 if passed else 1


def run_benches(args: argparse.Namespace, command: str, guard: netguard.KernelGuard) -> None:
    for name in args.benches:
        parts, runner = BENCHES[name]
        started = datetime.now(timezone.utc)
        began = time.monotonic()
        header = {"name": name, "command": command, "started": started.strftime("%Y-%m-%d %H:%M UTC"),
                  "machine": machine(), "versions": software(),
                  "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}}
        logging.info("bench %s: starting %s", name, ", ".join(parts))
        workdir = Path(tempfile.mkdtemp(prefix=f"streamapp-bench-{name}-"))
        try:
            with ExitStack() as stack:
                testbed = bed.start(stack, parts)
                result = runner(testbed, workdir, args)
        finally:
            if args.keep_workdir:
                logging.info("bench %s: work folder kept: %s", name, workdir)
            else:
                shutil.rmtree(workdir, ignore_errors=True)
        blocked, _ = netguard.verdict(guard.attempts, guard.run_id)
        out = {**header, "seconds": round(time.monotonic() - began, 1), "result": result,
               "network_guard": {"attempts_off_machine": len(blocked)}}
        path = args.results / f"{name}.json"
        path.write_text(json.dumps(out, indent=1, sort_keys=False) + "\n")
        logging.info("bench %s: wrote %s", name, path)


if __name__ == "__main__":
    sys.exit(main())
