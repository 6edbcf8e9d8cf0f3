"""The autoscale bench's figures from its per-second samples (pure; the harness is autoscale.py), the
samples as CSV and the time series as a PNG.

A sample is a dict of one second of a run: ``t`` (seconds since the run's base phase began),
``phase`` (base, step, back), ``produced`` (records produced that second), ``lag`` (records behind the
newest offsets, from the app's consumer group), ``input_rate``, ``processed_rate`` and ``batch_s``
(the driver's metrics of its last batch), ``registered`` (executors registered with the driver),
``with_tasks`` (executors that have run a task, from Spark's REST API; None when it does not answer),
``pods`` and ``pending`` (executor pods running / pending), ``driver_uid`` (the running driver's, else
the one being stopped: ``driver_stopping``), ``driver_restarts`` (its container's restartCount), ``target`` (status.scaling.target), ``decided_at`` (status.scaling.
lastDecisionTime, as ``t``), ``last_batch`` (when the driver's last batch committed, as ``t``).
"""

from __future__ import annotations

import csv
import statistics
from pathlib import Path

COLUMNS = ("method", "round", "t", "phase", "produced", "lag", "input_rate", "processed_rate", "batch_s", "registered",
           "with_tasks", "pods", "pending", "target", "decided_at", "last_batch", "driver_uid", "driver_stopping", "driver_restarts")


def _first(samples: list[dict], since: float, check) -> dict | None:
    return next((s for s in samples if s["t"] >= since and check(s)), None)


def _target_at(samples: list[dict], t: float) -> int | None:
    before = [s["target"] for s in samples if s["t"] < t and s.get("target") is not None]
    return before[-1] if before else None


def low_lag(samples: list[dict], window: float) -> list[tuple[float, int]]:
    """(t, the least lag over the trailing `window` seconds): the backlog right after each batch
    committed, without the records that arrive between triggers and wait for the next one."""
    out = []
    for i, s in enumerate(samples):
        seen = [x["lag"] for x in samples[: i + 1] if x["t"] > s["t"] - window and x.get("lag") is not None]
        if seen:
            out.append((s["t"], min(seen)))
    return out


def arrival_rate(samples: list[dict], t: float, span: float = 10.0) -> float | None:
    """Records produced per second over the `span` seconds up to `t`."""
    seen = [s["produced"] for s in samples if t - span < s["t"] <= t and s.get("produced") is not None]
    return sum(seen) / len(seen) if seen else None


def seconds_behind(samples: list[dict], lags: list[tuple[float, int]]) -> list[tuple[float, float]]:
    """`lags` (t, records) in seconds of input: records behind ÷ the rate they arrive at. A ×4 step
    quadruples what arrives while a batch runs, so the lag in records right after a batch cannot come
    back to its pre-step level while the step lasts; in seconds behind it can, once the app keeps up."""
    out = []
    for t, lag in lags:
        rate = arrival_rate(samples, t)
        if rate:
            out.append((t, lag / rate))
    return out


def _back_for_good(lows: list[tuple[float, float]], level: float | None, step_at: float) -> float | None:
    """Seconds from the step until the lows stay at or under `level` to the end of the ×4 phase (a
    rescale that throws the lag up again starts the clock anew); 0 when they never rose above it,
    None when they are above it at the end."""
    last_above = max((i for i, (_, lag) in enumerate(lows) if level is not None and lag > level), default=None)
    if level is None or not lows or last_above == len(lows) - 1:
        return None
    return 0.0 if last_above is None else round(lows[last_above + 1][0] - step_at, 1)


def scale_changes(samples: list[dict]) -> list[dict]:
    """Every change of status.scaling.target: when, from, to, in which phase."""
    changes, last = [], None
    for s in samples:
        target = s.get("target")
        if target is None:
            continue
        if last is not None and target != last:
            changes.append({"t": s["t"], "from": last, "to": target, "phase": s["phase"]})
        last = target
    return changes


def _when_decided(samples: list[dict], changed: dict) -> float:
    """The decision's own time (lastDecisionTime), else the first sample that showed it."""
    decided = next((s.get("decided_at") for s in samples if s["t"] >= changed["t"] and s.get("target") == changed["to"]), None)
    return decided if decided is not None and changed["t"] - 15 <= decided <= changed["t"] else changed["t"]


def _running_tasks(samples: list[dict], since: float, target: int) -> float | None:
    """When `target` executors had run tasks: from Spark's REST API, else registered executors and a
    batch committed after they were."""
    hit = _first(samples, since, lambda s: (s.get("with_tasks") or 0) >= target)
    if hit:
        return hit["t"]
    if any(s.get("with_tasks") is not None for s in samples if s["t"] >= since):
        return None
    registered = _first(samples, since, lambda s: (s.get("registered") or 0) >= target)
    if not registered:
        return None
    batch = _first(samples, registered["t"], lambda s: (s.get("last_batch") or -1e9) >= registered["t"])
    return batch["t"] if batch else None


def analyse(samples: list[dict], step_at: float, back_at: float, trigger_s: float) -> dict:
    """The figures of one run: the ×4 step at `step_at`, back to the base rate at `back_at`."""
    window = trigger_s + 2
    pre = [s["lag"] for s in samples if step_at - 30 <= s["t"] < step_at and s.get("lag") is not None]
    pre_lag = max(pre) if pre else None
    before = _target_at(samples, step_at)
    changes = scale_changes(samples)
    up = next((c for c in changes if step_at <= c["t"] < back_at + 5 and c["to"] > c["from"]), None)
    out: dict = {"pre_step_lag": pre_lag, "target_before_step": before, "changes": changes}
    decision = _when_decided(samples, up) if up else None
    out["step_to_decision_s"] = None if decision is None else round(decision - step_at, 1)
    out["target_after_step"] = max((c["to"] for c in changes if step_at <= c["t"] < back_at), default=before)
    tasks = _running_tasks(samples, decision, up["to"]) if up else None
    out["step_to_tasks_s"] = None if tasks is None else round(tasks - step_at, 1)
    out["decision_to_tasks_s"] = None if tasks is None else round(tasks - decision, 1)
    # back for good: from then on to the end of the ×4 phase the low point stays at or under the pre-step
    # level, in records and in seconds of input behind
    all_lows = low_lag(samples, window)
    lows = [(t, lag) for t, lag in all_lows if step_at <= t < back_at]
    out["peak_lag"] = max((s["lag"] for s in samples if s["t"] >= step_at and s.get("lag") is not None), default=None)
    out["step_to_lag_back_s"] = _back_for_good(lows, pre_lag, step_at)
    raw = [(s["t"], s["lag"]) for s in samples if step_at - 30 <= s["t"] < step_at and s.get("lag") is not None]
    pre_behind = [b for _, b in seconds_behind(samples, raw)]
    out["pre_step_behind_s"] = round(max(pre_behind), 1) if pre_behind else None
    out["step_to_behind_back_s"] = _back_for_good(seconds_behind(samples, lows), out["pre_step_behind_s"], step_at)
    down = next((c for c in changes if c["t"] >= back_at and c["to"] < c["from"]), None)
    out["back_to_scale_down_s"] = None if down is None else round(_when_decided(samples, down) - back_at, 1)
    uids = [s["driver_uid"] for s in samples if s.get("driver_uid")]
    restart_counts = [s["driver_restarts"] for s in samples if s.get("driver_restarts") is not None]
    out["driver_pods"] = len(dict.fromkeys(uids))
    out["driver_restarts"] = max(len(dict.fromkeys(uids)) - 1, 0) + (
        max(restart_counts) - restart_counts[0] if restart_counts else 0)
    # under steady load: a change in the base phase, or one against the step's direction
    out["changes_under_steady_load"] = sum(
        1 for c in changes if c["phase"] == "base" or (c["phase"] == "step" and c["to"] < c["from"])
        or (c["phase"] == "back" and c["to"] > c["from"]))
    return out


def summary(runs: list[dict]) -> dict:
    """Per method: the median of each figure over its rounds; the bars of the issue."""
    out = {}
    for method in dict.fromkeys(r["method"] for r in runs):
        mine = [r for r in runs if r["method"] == method]
        row: dict = {"rounds": len(mine)}
        for key in ("step_to_decision_s", "step_to_tasks_s", "decision_to_tasks_s", "step_to_lag_back_s",
                    "step_to_behind_back_s", "back_to_scale_down_s", "peak_lag"):
            values = [r["figures"][key] for r in mine if r["figures"].get(key) is not None]
            row[key] = round(statistics.median(values), 1) if len(values) == len(mine) else None
        for key in ("driver_restarts", "changes_under_steady_load"):
            row[key] = sum(r["figures"][key] for r in mine)
        row["rows_lost"] = sum(r["rows"]["lost"] for r in mine)
        row["rows_duplicated"] = sum(r["rows"]["duplicated"] for r in mine)
        row["targets"] = [f"{r['figures']['target_before_step']}→{r['figures']['target_after_step']}" for r in mine]
        row["meets"] = {
            "decision_to_tasks_le_30s": row["decision_to_tasks_s"] is not None and row["decision_to_tasks_s"] <= 30,
            "lag_back_le_3min": row["step_to_lag_back_s"] is not None and row["step_to_lag_back_s"] <= 180,
            "seconds_behind_back_le_3min": row["step_to_behind_back_s"] is not None
            and row["step_to_behind_back_s"] <= 180,
            "no_rows_lost_or_duplicated": row["rows_lost"] == 0 and row["rows_duplicated"] == 0,
            "no_driver_restart": row["driver_restarts"] == 0,
        }
        out[method] = row
    return out


def write_csv(path: Path, runs: list[dict]) -> None:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
        writer.writeheader()
        for r in runs:
            for s in r["samples"]:
                writer.writerow({"method": r["method"], "round": r["round"], **s})


def read_csv(path: Path, result: dict) -> list[dict]:
    """The runs of `result` (bench/results/autoscale.json's) with their samples from the CSV again."""
    ints = {"round", "produced", "lag", "registered", "with_tasks", "pods", "pending", "target", "driver_restarts"}
    texts = {"method", "phase", "driver_uid", "driver_stopping"}
    rows: dict[tuple[str, int], list[dict]] = {}
    with path.open() as f:
        for row in csv.DictReader(f):
            s = {k: (v if k in texts else int(float(v)) if k in ints else float(v)) for k, v in row.items() if v != ""}
            rows.setdefault((s.pop("method"), s.pop("round")), []).append(s)
    return [{**r, "samples": rows.get((r["method"], r["round"]), [])} for r in result["runs"]]


def plot(path: Path, runs: list[dict], title: str) -> None:
    """Input rate, lag, executors and batch duration over seconds since the ×4 step, every run in one
    figure (one colour per method)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colours = {"restart": "tab:red", "inPlace": "tab:blue"}
    fig, axes = plt.subplots(4, 1, figsize=(10, 10), sharex=True)
    labels = ("input rows/s (produced: thin)", "lag (records)", "executors (pods running; target dashed)",
              "batch duration (s)")
    for r in runs:
        colour = colours.get(r["method"], "tab:green")
        name = f"{r['method']} #{r['round']}" if max(x["round"] for x in runs) > 1 else r["method"]
        xs = [s["t"] - r["step_at"] for s in r["samples"]]

        def series(key, samples=r["samples"]):
            return [s.get(key) if s.get(key) is not None else float("nan") for s in samples]

        axes[0].plot(xs, series("produced"), color=colour, lw=0.6, alpha=0.5)
        axes[0].plot(xs, series("input_rate"), color=colour, lw=1.2, label=name)
        axes[1].plot(xs, series("lag"), color=colour, lw=1.2, label=name)
        axes[2].step(xs, series("pods"), color=colour, lw=1.2, where="post", label=name)
        axes[2].step(xs, series("target"), color=colour, lw=1, ls="--", where="post")
        axes[3].plot(xs, series("batch_s"), color=colour, lw=1.2, label=name)
        for t in restarts_at(r):
            for ax in axes:
                ax.axvline(t, color=colour, lw=0.8, ls=":")
    for ax, label in zip(axes, labels):
        ax.set_ylabel(label, fontsize=8)
        ax.axvline(0, color="grey", lw=0.8)
        ax.axvline(runs[0]["back_at"] - runs[0]["step_at"], color="grey", lw=0.8)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8, loc="upper left")
    axes[-1].set_xlabel("seconds since the ×4 step (grey lines: step up, step back; dotted: a new driver pod)")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def restarts_at(run: dict) -> list[float]:
    """Seconds since the step at which a new driver pod appeared."""
    out, last = [], None
    for s in run["samples"]:
        uid = s.get("driver_uid")
        if uid and last and uid != last:
            out.append(s["t"] - run["step_at"])
        last = uid or last
    return out


def plot_title(result: dict) -> str:
    """The PNG's title: the run's options in one line."""
    o = result["options"]
    where = "kind" if result.get("cluster") == "kind" else "the hand-built cluster"
    return (f"scaling.mode load on {where}: {o['rate']:.0f} rows/s, ×{o['factor']:g} for "
            f"{o['step_s']:.0f} s, back; {o['partitions']} partitions, trigger {o['trigger']}, "
            f"executors 1..{o['max_executors']}")


if __name__ == "__main__":
    # python -m streamapp_bench.autoscale_analysis DIR: the figures and the PNG again from DIR's saved
    # samples (autoscale.csv), into DIR/autoscale.json and DIR/autoscale.png
    import json
    import sys

    results = Path(sys.argv[1])
    saved = json.loads((results / "autoscale.json").read_text())
    runs = read_csv(results / "autoscale.csv", saved["result"])
    trigger_s = float(saved["result"]["options"]["trigger"].rstrip("s"))
    for r in runs:
        r["figures"] = analyse(r["samples"], r["step_at"], r["back_at"], trigger_s)
    saved["result"]["runs"] = [{k: v for k, v in r.items() if k != "samples"} for r in runs]
    saved["result"]["summary"] = summary(runs)
    (results / "autoscale.json").write_text(json.dumps(saved, indent=1) + "\n")
    plot(results / "autoscale.png", runs, plot_title(saved["result"]))
