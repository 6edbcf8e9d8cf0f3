"""bench/results/<name>.json → the tables between the bench markers of bench/README.md."""

from __future__ import annotations

import json
import os
from pathlib import Path

from . import dataplane_figures, recovery_phases
from .dataplane_figures import LABELS

BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"


def _n(value, digits: int = 0, unit: str = "") -> str:
    if value is None:
        return "—"
    return f"{value:,.{digits}f}{unit}"


def _ms(value) -> str:
    return "—" if value is None else f"{value / 1000:.2f} s"


def _target(value, goal: float, higher: bool = True, unit: str = "") -> str:
    if value is None:
        return "—"
    ok = value >= goal if higher else value <= goal
    return f"{value:.2f}{unit} ({'meets' if ok else 'misses'} {'≥' if higher else '≤'} {goal:g}{unit})"


def _spread(s: dict | None, digits: int = 0, unit: str = "", scale: float = 1) -> str:
    """A spread of rounds.spread as "median (min–max)"; the median alone when one run gave it."""
    if not s or s.get("median") is None:
        return "—"
    text = lambda v: f"{v / scale:,.{digits}f}"  # noqa: E731
    if s["runs"] == 1 or s["min"] == s["max"]:
        return f"{text(s['median'])}{unit}"
    return f"{text(s['median'])}{unit} ({text(s['min'])}–{text(s['max'])})"


def _ratio_target(s: dict | None, goal: float, why: str = "") -> str:
    if not s or s.get("median") is None:
        return "—"
    by = " by its median" if s["runs"] > 1 else ""
    return f"{_spread(s, 2)} ({'meets' if s['median'] >= goal else 'misses'} ≥ {goal:g}{by}{why})"


def dataplane(r: dict, images: str = "bench/results") -> list[str]:
    d = r["result"]
    t, lat, ratios, rounds = d["throughput"], d.get("latency", {}), d["ratios"], d.get("rounds", 1)
    warm = r["args"].get("warm_seconds")
    live = (f" Latency at a fixed {d['live_rate']:,.0f} events/s (half the slowest engine's median) for "
            f"{r['args'].get('live_seconds', '?')} s{f' after {warm:g} s of warm-up at that rate' if warm else ''}"
            f"{', in as many rounds, interleaved the same way' if rounds > 1 else ''}."
            if lat else "")
    how = (f"{rounds} rounds: every engine once per round, interleaved, every other round reversed (a, a′, b, c, d, d, c, …), each run reading the "
           f"same backlog from the beginning; medians with the lowest and highest run in brackets, ratios taken "
           f"within each round." if rounds > 1 else
           "One run of each engine, one after another on the same backlog: no spread (a single run cannot tell a "
           "20 % change from noise).")
    lines = [f"**Data plane** — seed 000 click sessions (1-minute tumbling windows per session: clicks, page views, "
             f"time spent; 30 s watermark), N = {d['n']:,} events ({d['counted']:,} clicks and page views) on "
             f"{d['partitions']} partitions; emit updates; Spark `maxOffsetsPerTrigger` {d['max_offsets_per_trigger']:,}. "
             f"{how}{live}", "",
             "| engine | events/s (10 %→90 %) | measured over | (a) ÷ this, per round | latency p50 | latency p99 |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for engine in dataplane_figures.in_order(list(t)):
        row = t[engine]
        ratio = "1.00" if engine == "runtime" else _spread(ratios.get(dataplane_figures.A_OVER.get(engine, "")), 2)
        extra = f" ({row['passes']} passes)" if row.get("passes", 1) > 1 else ""
        if row.get("n"):
            extra += f" (N = {row['n']:,})"
        lat_row = lat.get(engine, {})
        lines.append(f"| {LABELS[engine]} | {_spread(row['events_per_s'])} | "
                     f"{_n(row['measured_seconds']['median'], 0, ' s')}{extra} | {ratio} | "
                     f"{_spread(lat_row.get('p50_ms'), 2, ' s', 1000)} | {_spread(lat_row.get('p99_ms'), 2, ' s', 1000)} |")
    minimum = r["args"].get("min_seconds", 60)
    short_name = lambda e: LABELS[e].split(" ")[0]  # noqa: E731
    again = [f"{short_name(e)} at N = {d['n']:,} "
             f"{'was stopped after' if t[e]['at_default_n'].get('stopped_early') else 'wrote output for'} "
             f"{t[e]['at_default_n']['output_seconds']:.0f} s{' of output' if t[e]['at_default_n'].get('stopped_early') else ''} "
             f"({_n(t[e]['at_default_n']['events_per_s'])} events/s)" for e in t if t[e].get("at_default_n")]
    if again:
        lines += ["", f"Engines that at N worked less than {minimum:g} s, or would have worked more than "
                  f"{3 * minimum:g} s, ran on a larger or smaller backlog (its N in the row) in every round, "
                  f"decided by their first run: {'; '.join(again)}."]
    resumed = [f"{short_name(e)} {t[e]['first_n']:,}" for e in t if t[e].get("first_n") and not t[e].get("at_default_n")]
    if resumed:
        lines += ["", f"First runs started from the backlog the previous results decided (the same rule kept or "
                  f"changed it; its N in the row): {', '.join(resumed)}."]
    short = [f"{short_name(e)} {run['output_seconds']:.0f} s (round {run.get('round', 0) + 1})" for e in t
             for run in t[e]["runs"] if run.get("output_seconds") is not None and run["output_seconds"] < minimum]
    if short:
        lines += ["", f"Runs that still wrote output for less than {minimum:g} s: {', '.join(short)}."]
    plain = (f"(a)/(b₀) = {_ratio_target(ratios['a_over_b_plain'], 1.2, ': the compiler’s settings against a plain job’s')}; "
             if ratios.get("a_over_b_plain") else "")
    lines += ["", f"Per round: {plain}(a)/(b) = {_spread(ratios.get('a_over_b'), 2)} (the same job by hand, "
              f"with the runtime's state store and shuffle partitions); "
              f"(a)/(c) = {_ratio_target(ratios.get('a_over_c'), 0.5, '; goal 1')}; (a)/(d) = {_spread(ratios.get('a_over_d'), 3)}."]
    p99 = lat.get("runtime", {}).get("p99_ms", {}).get("median")
    if p99 is not None:
        lines[-1] += (f" Windowed p99 at {d['live_rate']:,.0f} events/s: {p99 / 1000:.2f} s "
                      f"({'meets' if p99 <= 1000 else 'misses'} ≤ 1 s).")
    if ratios.get("a_nodlq_over_b"):
        lines[-1] += (f" With dead letters off, (a′)/(b) = {_spread(ratios['a_nodlq_over_b'], 2)} and "
                      f"(a′)/(c) = {_spread(ratios.get('a_nodlq_over_c'), 2)}.")
    avro = t.get("runtime-avro", {}).get("events_per_s", {}).get("median")
    if avro is not None and t.get("runtime", {}).get("events_per_s", {}).get("median"):
        json_rate = t["runtime"]["events_per_s"]["median"]
        lines[-1] += (f" Avro ÷ JSON values (the same events, Avro in the Confluent wire format through the schema "
                      f"registry): {avro / json_rate:.2f} by the medians ({_n(avro)} against {_n(json_rate)} events/s); "
                      f"per round, (a)/(aᵛ) = {_spread(ratios.get('a_over_avro'), 2)}.")
    profile = t.get("runtime", {}).get("batch_profile")
    if profile:
        ms = profile["ms"]
        parts = ", ".join(f"{phase} {ms[phase]:,.0f}" for phase in ("addBatch", "walCommit", "commitOffsets",
                                                                       "latestOffset", "queryPlanning", "getBatch"))
        lines += ["", f"Where (a)'s micro-batches went (Spark's progress of each, in its run nearest the median): "
                  f"{profile['batches']} batches of "
                  f"{profile['rows_per_batch']:,.0f} records on average, {ms['triggerExecution']:,.0f} ms each: {parts} ms "
                  f"(addBatch is the work: read, parse, aggregate, state, write; the state store's commit "
                  f"{profile['state_commit_ms']:,.0f} ms of it); {profile['batches_without_input']} batches without input "
                  f"(watermark only)."]
    db = d.get("db")
    if db and db.get("rows_upserted"):
        # scrolls included, as in the events produced
        closed = db["events_in_closed_windows"] * db["events"] / db.get("counted_events", db["events"] * d["counted"] / d["n"])
        lines += ["", f"DB writes (the example as written: emit final, Kafka + Postgres sinks, `--available-now` over "
                  f"a backlog of the same kind): {db['rows_upserted']:,} rows upserted for {db['events']:,} events = "
                  f"**{db['db_write_ratio']:.3f}** rows per event; counting only the events of windows the watermark "
                  f"had closed (the last ~90 s of event time stay open at the end of the input): "
                  f"{db['rows_upserted'] / closed:.3f} ({closed / db['rows_upserted']:.1f}× fewer writes than one "
                  f"per event)."]
    lines += ["", f"![data plane: events/s per engine, each round and the median]({images}/{dataplane_figures.PNG_THROUGHPUT})"]
    if dataplane_figures.has_cdf(d):
        lines += ["", f"![data plane: latency CDF per engine and round]({images}/{dataplane_figures.PNG_LATENCY})"]
    return lines


def controlplane(r: dict, images: str = "bench/results") -> list[str]:
    c = r["result"]
    fails = c.get("failures", {})
    lines = [f"**Control plane** — {c['total']:,} StreamApps applied in batches of {c['batch']} on the test bed's "
             f"API server, {c['nodes']} kwok nodes; {c['fail']} drivers failed by kwok's chaos stage at the first "
             f"batch and at the full count (restart backoff 1 s, included). Measured once the operator is ready "
             f"(its liveness endpoint answers and a probe app, not counted, got its driver"
             f"{', ' + format(c['operator_ready_seconds'], '.1f') + ' s after start' if c.get('operator_ready_seconds') else ''}).", "",
             "| apps | apply → driver created p50 / p99 | operator RSS | operator CPU, % of a core (applying / settled) | "
             "API requests per app, server mean | failure → replacement created p50 / p99 | load average (1 min) |",
             "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for s in c["steps"]:
        f = fails.get(str(s["apps"]), {})
        settled = s.get("cpu_percent_settled")
        cpu = f"{_n(s['cpu_percent_during_batch'], 0, ' %')} / {_n(settled, 0, ' %')}" if settled is not None \
            else _n(s["cpu_percent_during_batch"], 0, " %")
        failure = f"{_n(f.get('p50_s'), 2, ' s')} / {_n(f.get('p99_s'), 2, ' s')}" if f else ""
        lines.append(f"| {s['apps']:,} | {_n(s['p50_s'], 2, ' s')} / {_n(s['p99_s'], 2, ' s')} | "
                     f"{_n(s.get('rss_settled_mib', s['rss_mib']), 0, ' MiB')} | {cpu} | "
                     f"{_n(s.get('apiserver_requests_per_app'), 0)}, {_n(s.get('apiserver_mean_ms'), 0, ' ms')} | {failure} | "
                     f"{_n(s.get('load_1m'), 1)} |")
    g = c["growth"]
    last = c["steps"][-1]
    fl = fails.get(str(last["apps"]), {})
    lines += ["", f"Targets at {last['apps']:,} apps: apply p99 {_target(last['p99_s'], 2.0, False, ' s')}; "
              f"failure p99 {_target(fl.get('p99_s'), 2.0, False, ' s')}; RSS peak "
              f"{_target(c['rss_peak_mib'], 300, False, ' MiB')}. Growth {c['steps'][0]['apps']} → {last['apps']} "
              f"apps: apply p99 ×{_n(g['apply_p99'], 1)}, RSS ×{_n(g['rss'], 2)}, failure p99 ×{_n(g['failure_p99'], 1)}."]
    if fl.get("slowest"):
        lines[-1] += (f" Slowest replacements at {last['apps']:,} apps: "
                      + ", ".join(f"{app} {sec:.2f} s" for app, sec in sorted(fl["slowest"].items(), key=lambda kv: -kv[1]))
                      + ".")
    prof = c.get("profile") or {}
    ours = [(f, p) for f, p in prof.get("operator_inclusive_percent", [])
            if not f.startswith(("reconcile (", "observe (reconcile", "main (", "<module>"))][:5]
    if ours:
        lines += ["", f"py-spy over the operator from the start of the last batch ({prof['samples']:,} samples, waiting "
                  f"threads included): " + ", ".join(f"`{f}` {p:g} %" for f, p in ours) + "."]
    seen = fails.get(str(last["apps"]), {})
    if seen and seen.get("failed_seen", 0) < seen.get("victims", 0):
        lines[-1] += f" At {last['apps']:,} apps {seen['failed_seen']} of {seen['victims']} failed drivers were seen Failed in time."
    return lines


def _cluster(d: dict) -> str:
    """Where a cluster bench ran: its result says "kind"; results from before it say nothing."""
    if d.get("cluster") == "kind":
        return "the kind cluster (testbed/kind, one node)"
    return "the hand-built single-node cluster that kind has since replaced"


def recovery(r: dict, images: str = "bench/results") -> list[str]:
    d = r["result"]
    cold, kills = d["cold"], d["restarts"]
    lines = [f"**Recovery** — click sessions on {_cluster(d)} (driver + executor pods, trigger "
             f"{d['trigger_s']:g} s, {d['rate']:g} clicks/s arriving); SIGKILL to the driver's JVM inside the pod, "
             f"restart backoff {d['restart_backoff']}. \"First batch\": every sink query of the driver committed a "
             f"batch started after the kill (or the apply).", "",
             "| | → driver pod Running | → first committed batch | " + " | ".join(recovery_phases.PHASES) + " |",
             "| --- | ---: | ---: |" + " ---: |" * len(recovery_phases.PHASES)]
    for label, k in [("cold start (`kubectl apply`)", cold), *((f"kill {i}", k) for i, k in enumerate(kills, 1))]:
        parts = k.get("phases") or {}
        lines.append(f"| {label} | {_n(k['to_running_s'], 1, ' s')} | {_n(k['to_first_batch_s'], 1, ' s')} | "
                     + " | ".join(_n(parts.get(p), 1, ' s') for p in recovery_phases.PHASES) + " |")
    lines += ["", f"Restart p50 kill → first batch {_target(d['restart_p50_to_first_batch_s'], d['target_s'], False, ' s')} "
              f"(cold start + one trigger interval). The phases: `bench/streamapp_bench/recovery_phases.py`."]
    if any(k.get("phases") for k in [cold, *kills]):
        lines += ["", f"![recovery: each start in phases]({images}/recovery.png)"]
    return lines


def delivery(r: dict, images: str = "bench/results") -> list[str]:
    d = r["result"]
    rates, ratio = d["events_per_s"], d["eos_over_alo"]
    lines = [f"**Delivery** — the data-plane workload (N = {d['n']:,} events on {d['partitions']} partitions, emit "
             f"updates, `maxOffsetsPerTrigger` {d['max_offsets_per_trigger']:,}) through the Kafka sink with "
             f"`delivery: at-least-once` (Spark's sink) and `exactly-once` (a Kafka transaction per batch partition), "
             f"{d['repeats']} runs each, interleaved; latency at a fixed {d['live_rate']:,.0f} events/s.", "",
             "| Kafka sink | events/s median (min–max) | latency p50 | latency p99 |", "| --- | ---: | ---: | ---: |"]
    for engine, label in (("runtime", "at-least-once"), ("runtime-eos", "exactly-once")):
        rate, lat = rates[engine], d["latency"].get(engine, {})
        lines.append(f"| {label} | {_n(rate['median'])} ({_n(rate['min'])}–{_n(rate['max'])}) | "
                     f"{_ms(lat.get('p50_ms'))} | {_ms(lat.get('p99_ms'))} |")
    lines += ["", f"Exactly-once ÷ at-least-once throughput, per back-to-back pair: median {_n(ratio['median'], 2)} "
              f"(min {_n(ratio['min'], 2)}, max {_n(ratio['max'], 2)}, {ratio['runs']} pairs)."]
    return lines


def autoscale(r: dict, images: str = "bench/results") -> list[str]:
    d = r["result"]
    o = d["options"]
    head = (f"**Autoscale** — `scaling.mode: load` on {_cluster(d)} (driver and executor pods; node "
            f"allocatable {d['node_allocatable']['cpu']} CPU): a count per key of JSON records (CPU spent on each: "
            f"`sha2(repeat(pad, {o['work']}), 256)`) upserted into Postgres, {o['partitions']} partitions, trigger "
            f"{o['trigger']}, executors 1..{o['max_executors']} of 1 core (asking {o['executor_cpu']} CPU), "
            f"scaleUpWindow {o['up_window']}, scaleDownWindow {o['down_window']}. {o['rate']:,.0f} records/s for "
            f"{o['base_s']:.0f} s, ×{o['factor']:g} for {o['step_s']:.0f} s, back for {o['back_s']:.0f} s; sampled "
            f"every second. Lag: the app's consumer group against the newest offsets; \"back\": its low point per "
            f"trigger no higher than the highest lag of the 30 s before the step, to the end of the ×4 phase, in records "
            f"and in seconds of input behind (records ÷ the rate they arrive at: at ×4 input a batch's own arrivals "
            f"keep the lag in records above its pre-step level however fast the app keeps up). Rows: each key's "
            f"count in the table against what the broker acknowledged.")
    lines = [head, "", "| rescale | executors | step → decision | decision → new executors run tasks | step → lag back "
             "(records) | step → lag back (seconds behind) | peak lag | driver restarts | rows lost / duplicated | "
             "changes under steady load |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for method, row in d["summary"].items():
        s = {k: _n(row.get(k), 0, " s") for k in ("step_to_decision_s", "decision_to_tasks_s", "step_to_lag_back_s",
                                                   "step_to_behind_back_s")}
        lines.append(f"| {method} | {', '.join(row['targets'])} | {s['step_to_decision_s']} | "
                     f"{s['decision_to_tasks_s']} | {s['step_to_lag_back_s']} | {s['step_to_behind_back_s']} | "
                     f"{_n(row.get('peak_lag'), 0)} | {row['driver_restarts']} | "
                     f"{row['rows_lost']} / {row['rows_duplicated']} | {row['changes_under_steady_load']} |")
    lines += ["", "Bars of issue 15: decision → new executors running tasks ≤ 30 s; 0 driver restarts (in place); lag "
              "back to its pre-step level within 3 min of the ×4 step; 0 rows lost or duplicated. "
              f"{len(d['runs'])} run(s), figures the median over rounds."]
    for method, why in d.get("skipped", {}).items():
        lines += ["", f"Not run: {method} ({why})."]
    lines += ["", f"![autoscale: input rate, lag, executors, batch duration]({images}/autoscale.png)"]
    return lines


def realtime(r: dict, images: str = "bench/results") -> list[str]:
    d = r["result"]
    lat = d["latency"]
    lines = [f"**Real-time mode** — examples/click-feed.yaml (JSON clicks filtered, a column added, keyed by session: "
             f"stateless, Kafka → Kafka, at-least-once, dead letters on) at a fixed {d['rate']:,.0f} events/s for "
             f"{d['seconds']:g} s on {d['partitions']} partitions, measured after 10 s at that rate (a warm-up); between "
             f"real-time checkpoints (every 5 min: what each costs is in docs/runtime.md); micro-batches back to back (local[2]) "
             f"against `trigger: realtime` (a task per partition and query: local[{2 * d['partitions']}]), "
             f"{d['rounds']} rounds interleaved. Latency: broker time of the input record → broker time of its output "
             "record; medians over the rounds with the lowest and highest run in brackets.", "",
             "| mode | events/s produced | latency p50 | latency p99 | p99.9 | max | records lost |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for mode, label in (("micro-batch", "micro-batches"), ("realtime", "`trigger: realtime`")):
        m = lat[mode]
        lines.append(f"| {label} | {_spread(m['achieved_rate'])} | {_spread(m['p50_ms'], 0, ' ms')} | "
                     f"{_spread(m['p99_ms'], 0, ' ms')} | {_spread(m['p999_ms'], 0, ' ms')} | "
                     f"{_spread(m['max_ms'], 0, ' ms')} | {', '.join(str(x) for x in m['missing'])} |")
    p99 = lat["realtime"]["p99_ms"]["median"]
    ratio = d["microbatch_over_realtime_p99"]
    lines += ["", f"Bar of issue 17: real-time p99 ≤ {d['bar_p99_ms']} ms at 10,000 events/s: "
              + ("—" if p99 is None else f"{p99:.0f} ms ({'meets' if p99 <= d['bar_p99_ms'] else 'misses'})")
              + f". Micro-batch p99 ÷ real-time p99, per round: {_spread(ratio, 1)}.", "",
              f"![real-time mode: latency CDF of each run]({images}/realtime-latency.png)"]
    return lines


def statefns(r: dict, images: str = "bench/results") -> list[str]:
    d = r["result"]
    lines = [f"**State functions** — the runtime's `accumulate` step (a running sum and count per key, in event-time "
             f"order) compiled with each Python state API, {d['n']:,} JSON records on {d['partitions']} partitions, "
             f"{d['keys']:,} keys, 50,000 per batch, RocksDB, to a no-op sink; one local[2] session runs each once per "
             f"round, {d['rounds']} rounds interleaved. "
             "Rows per second of `addBatch` time: medians with the lowest and highest run in brackets. New checkpoints' "
             "`accumulate` and table joins run `transformWithState`; older ones keep `applyInPandasWithState` "
             "(docs/runtime.md, \"Per-key state\").", "",
             "| Python state function | rows/s | ÷ applyInPandasWithState, per round |", "| --- | ---: | ---: |"]
    for variant, rate in d["rows_per_s"].items():
        ratio = d["over_pandas_state"].get(variant)
        lines.append(f"| `{variant}` | {_spread(rate)} | {_spread(ratio, 2) if ratio else '1'} |")
    return lines


RENDER = {"dataplane": dataplane, "realtime": realtime, "statefns": statefns, "delivery": delivery, "controlplane": controlplane, "recovery": recovery,
          "autoscale": autoscale}


def render(results: dict[str, dict], images: str = "bench/results") -> str:
    """The figures of every result; `images`: the results folder as the README links it."""
    any_r = next(iter(results.values()))
    m = any_r["machine"]
    # The bench's own processes (broker, API server, engines) keep a 2-core machine's load near 2–5.
    busy = max(float(r["machine"]["load_at_start"].split()[0]) for r in results.values()) > 2 * m["cpus"] + 1
    where = ("the machine was shared with other work (load averages below), so only the ratios measured in the "
             "same run mean much" if busy else "the load averages below are about what the bench's own processes "
             "cause; the ratios measured in the same run are still the figures to compare")
    # benches run at different times may have run different versions: then each says its own
    shared = all(r["versions"] == any_r["versions"] for r in results.values())

    def versions(r: dict) -> str:
        return ", ".join(f"{k} {v}" for k, v in r["versions"].items())

    lines = [f"On {m['cpus']} × {m['cpu']}, {m['memory_gib']} GiB, {m['os']} — {where}. "
             + (f"Versions: {versions(any_r)}." if shared else "Versions: each bench's line below.")]
    for name, r in results.items():
        quick = " **(a `--quick` run: small inputs, few rounds; not the project's figures)**" if r["args"].get("quick") else ""
        lines += ["", *RENDER[name](r, images=images), "", f"<sub>{name}: `{r['command']}`, {r['started']}, "
                  f"{r['seconds']:.0f} s, load average {r['machine']['load_at_start']} at the start, "
                  f"`{images}/{name}.json`{'' if shared else f'; {versions(r)}'}</sub>{quick}"]
    return "\n".join(lines)


def update_readme(readme: Path, results_dir: Path) -> None:
    """Render between the markers of `readme`; a missing `readme` (a quick run's) is made with them."""
    results = {p.stem: json.loads(p.read_text()) for p in sorted(results_dir.glob("*.json")) if p.stem in RENDER}
    if not results:
        return
    if not readme.exists():
        readme.write_text(f"# Figures of a `--quick` bench run (not the project's figures)\n\n{BEGIN}\n{END}\n")
    text = readme.read_text()
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{readme}: the markers {BEGIN} / {END} are missing")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    images = os.path.relpath(results_dir.resolve(), readme.resolve().parent)
    readme.write_text(f"{head}{BEGIN}\n{render(results, images)}\n{END}{tail}")
