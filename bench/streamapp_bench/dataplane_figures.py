"""The data-plane bench's figures from its runs: each engine's median and spread over the rounds, each
ratio from the runs of one round, and the two plots (throughput per engine, latency CDFs). Pure but for
the `plot_*` functions, which draw what the pure ones computed."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from .rounds import per_round_ratio, quantile_levels, spread

# The engines' names in tables and legends (engines.py says what each one is).
LABELS = {"runtime": "(a) StreamApp runtime", "handwritten": "(b) hand-written PySpark",
          "handwritten-plain": "(b₀) hand-written PySpark, Spark's defaults", "kstreams": "(c) Kafka Streams", "raw": "(d) raw consumer",
          "runtime-nodlq": "(a′) runtime, dead letters off",
          "runtime-eos": "(a) runtime, Kafka sink exactly-once",
          "runtime-avro": "(aᵛ) runtime, Avro values"}

# the order of the engines in a round, in the table and in the plots: (a), (a′), (b), (c), (d)
ORDER = ("runtime", "runtime-nodlq", "runtime-avro", "handwritten", "handwritten-plain", "kstreams", "raw")
# ratio name in the results → (engine over engine), each taken within one round
PAIRS = {"a_over_b": ("runtime", "handwritten"), "a_over_b_plain": ("runtime", "handwritten-plain"),
         "a_over_c": ("runtime", "kstreams"), "a_over_d": ("runtime", "raw"),
         "a_over_a_nodlq": ("runtime", "runtime-nodlq"), "a_over_avro": ("runtime", "runtime-avro"),
         "a_nodlq_over_b": ("runtime-nodlq", "handwritten"), "a_nodlq_over_c": ("runtime-nodlq", "kstreams")}
# what the table's "(a) ÷ this" column of each engine is
A_OVER = {"runtime-nodlq": "a_over_a_nodlq", "runtime-avro": "a_over_avro", "handwritten": "a_over_b", "handwritten-plain": "a_over_b_plain",
          "kstreams": "a_over_c", "raw": "a_over_d"}
COLOURS = {"runtime": "tab:blue", "runtime-nodlq": "tab:cyan", "runtime-avro": "tab:purple", "handwritten": "tab:orange",
           "handwritten-plain": "tab:brown", "kstreams": "tab:green",
           "raw": "tab:grey", "micro-batch": "tab:blue", "realtime": "tab:red"}
PNG_THROUGHPUT, PNG_LATENCY = "dataplane-throughput.png", "dataplane-latency.png"


def in_order(engines: Sequence[str]) -> list[str]:
    return [e for e in ORDER if e in engines] + [e for e in engines if e not in ORDER]


def throughput_figures(runs: dict[str, list[dict]]) -> dict:
    """Per engine: events/s and seconds measured, median (min–max) over its rounds; the backlog it ran on
    (the same in every round; `n` only when other than the default N, with `at_default_n`: what its
    first run at N gave, or `first_n`: the backlog its first run started from, the previous results'), the raw consumer's passes, the batch profile of the run nearest the median;
    then the runs themselves."""
    out = {}
    for engine, rs in runs.items():
        first, middle = (rs[0] if rs else {}), (median_run(rs) or {})
        out[engine] = {"events_per_s": spread([r.get("events_per_s") for r in rs]),
                       "measured_seconds": spread([r.get("measured_seconds") for r in rs]),
                       **{k: first[k] for k in ("n", "at_default_n", "first_n", "passes") if k in first},
                       **({"batch_profile": middle["batch_profile"]} if middle.get("batch_profile") else {}),
                       "runs": [{k: v for k, v in r.items() if k != "at_default_n"} for r in rs]}
    return out


def ratios(runs: dict[str, list[dict]]) -> dict:
    """Every ratio of PAIRS whose engines both ran, from the two runs of each round."""
    def rates(engine):
        return [r.get("events_per_s") for r in runs[engine]]

    return {name: per_round_ratio(rates(top), rates(bottom)) for name, (top, bottom) in PAIRS.items()
            if runs.get(top) and runs.get(bottom)}


def latency_figures(runs: dict[str, list[dict]]) -> dict:
    """Per engine: latency p50 and p99, median (min–max) over its rounds, and the runs."""
    return {engine: {"p50_ms": spread([r.get("p50_ms") for r in rs]), "p99_ms": spread([r.get("p99_ms") for r in rs]),
                     "runs": rs} for engine, rs in runs.items()}


def live_rate(throughput: dict, engines: Sequence[str]) -> float:
    """Half the slowest engine's median rate: the fixed rate of the latency runs."""
    medians = [throughput[e]["events_per_s"]["median"] for e in engines if throughput.get(e, {}).get("events_per_s", {}).get("median")]
    return 0.5 * min(medians) if medians else 1000.0


def median_run(runs: list[dict]) -> dict | None:
    """The run whose rate is nearest the median of the rates (for the one batch profile the README shows)."""
    measured = [r for r in runs if r.get("events_per_s")]
    if not measured:
        return None
    middle = spread([r["events_per_s"] for r in measured])["median"]
    return min(measured, key=lambda r: abs(r["events_per_s"] - middle))


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_throughput(path: Path, throughput: dict, labels: dict, title: str) -> None:
    """One row per engine: a bar to its median rate and a dot for each round (log scale: the raw
    consumer reads an order of magnitude faster than the engines aggregate)."""
    plt = _pyplot()
    engines = in_order(list(throughput))[::-1]  # first engine on top
    fig, ax = plt.subplots(figsize=(10, 0.7 * len(engines) + 1.6))
    for y, engine in enumerate(engines):
        t = throughput[engine]
        colour = COLOURS.get(engine, "tab:purple")
        rates = [r["events_per_s"] for r in t["runs"] if r.get("events_per_s")]
        median = t["events_per_s"]["median"]
        if median:
            ax.barh(y, median, height=0.55, color=colour, alpha=0.35)
            low_high = f" ({min(rates):,.0f}–{max(rates):,.0f})" if min(rates) != max(rates) else ""
            ax.text(median * 1.04, y + 0.3, f"{median:,.0f}{low_high}", fontsize=8, va="center")
        ax.scatter(rates, [y] * len(rates), color=colour, s=22, zorder=3, edgecolors="black", linewidths=0.4)
    ax.set_yticks(range(len(engines)), [labels.get(e, e) for e in engines], fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel("events/s, 10 %→90 % of the backlog (log scale; bar: median, dots: each round)", fontsize=8)
    ax.grid(alpha=0.3, axis="x")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def plot_latency(path: Path, latency: dict, labels: dict, title: str,
                 what: str = "seconds from an event to the first output row that counts it") -> None:
    """The CDF of event → output latency of every run, one colour per engine (log scale)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(10, 5))
    for engine in in_order(list(latency)):
        colour = COLOURS.get(engine, "tab:purple")
        p50, p99 = latency[engine]["p50_ms"]["median"], latency[engine]["p99_ms"]["median"]
        label = labels.get(engine, engine) + (f": p50 {_seconds(p50)}, p99 {_seconds(p99)} (medians)"
                                              if p50 is not None and p99 is not None else "")
        for r in latency[engine]["runs"]:
            values = r.get("cdf") or []
            if not values:
                continue
            levels = quantile_levels(len(values) - 2)
            ax.plot([max(v, 1) / 1000 for v in values], levels, color=colour, lw=1.1, alpha=0.8, label=label)
            label = None  # one legend entry per engine
    ax.set_xscale("log")
    ax.set_xlabel(f"{what} (log scale; one line per round)", fontsize=8)
    ax.set_ylabel("fraction of events", fontsize=8)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8, loc="upper left")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _seconds(ms: float) -> str:
    return f"{ms / 1000:.2f} s" if ms >= 1000 else f"{ms:.0f} ms"


def has_cdf(result: dict) -> bool:
    return any(r.get("cdf") for lat in result.get("latency", {}).values() for r in lat.get("runs", []))


def plot(results_dir: Path, result: dict, when: str) -> list[Path]:
    """Both PNGs into `results_dir` (the latency one when the runs kept their distributions)."""
    rounds = result.get("rounds", 1)
    head = f"Data plane, N = {result['n']:,}, {f'{rounds} rounds interleaved' if rounds > 1 else 'one run of each engine'} ({when})"
    written = [results_dir / PNG_THROUGHPUT]
    plot_throughput(written[0], result["throughput"], LABELS, head)
    if has_cdf(result):
        written.append(results_dir / PNG_LATENCY)
        plot_latency(written[1], result["latency"], LABELS,
                     f"{head}: latency at a fixed {result['live_rate']:,.0f} events/s")
    return written


if __name__ == "__main__":
    # python -m streamapp_bench.dataplane_figures DIR: both PNGs again from DIR/dataplane.json
    import json
    import sys

    results = Path(sys.argv[1])
    saved = json.loads((results / "dataplane.json").read_text())
    print(*plot(results, saved["result"], saved["started"]), sep="\n")
