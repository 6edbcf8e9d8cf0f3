"""click-sessions on a real cluster, one app through a whole life: the operator installed by its
Helm chart, the example applied, generated clicks produced to Kafka in rounds; the driver and
executor pods really run Spark. After every disruption — the driver pod force-deleted, the driver's
JVM killed with SIGKILL inside the pod, suspend and resume, partitions added, `kubectl scale` down
and up — a new round of clicks is produced and both sinks (the output topic and the Postgres table,
both exactly-once) must hold exactly the windows a correct run gives for every click so far: a new
driver resumed from the same checkpoint and lost nothing; a rescale was applied in place by the
same driver pod without restarting a query. A real Prometheus scraped everything meanwhile.

The tests run in order and build on each other (one app, to keep the time reasonable)."""

from __future__ import annotations

import re
import urllib.request

import pytest

from streamapp_testkit.e2e_clicks import (APP, CLASS, LATE, MALFORMED, NS, PG_SECRET, REPO, RUN, TOPIC, app_object,
                        executors_follow, manifest, new_driver, outputs_exact, produce, round_events, running)  # fmt: skip
from streamapp_api.sinks import query_name_of
from streamapp_testbed.paths import image_tag
from streamapp_testbed.waiting import NotYet, wait_for
from streamapp_testbed import cluster_apps, kafka_admin

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

SENT: list = []  # every valid click produced so far, in order


def produce_round(c, n: int, extra: tuple[str, ...] = ()) -> None:
    events = round_events(n)
    produce(c.kafka_bootstrap, events, extra)
    SENT.extend(events)


def assert_outputs_exact(c, timeout: float = 600) -> None:
    wait_for("output topic and table equal to the expected windows", lambda: outputs_exact(c, SENT),
             timeout=timeout, every=5)


def driver_uid(c) -> str:
    return running(c, "driver")[0]["metadata"]["uid"]


def test_runs_on_driver_and_executor_pods_and_both_sinks_are_exact(operator, prometheus):
    c = operator
    c.apply(cluster_apps.hostpath_volume(f"streamapp-e2e-{RUN}", c.volume_dir(RUN), CLASS), {
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": PG_SECRET, "namespace": NS},
        "stringData": {"uri": c.postgres_dsn},
    })  # fmt: skip
    kafka_admin.create_topic(c.kafka_bootstrap, TOPIC, partitions=2)
    produce_round(c, 0, extra=(MALFORMED,))
    c.apply(manifest(c.kafka_bootstrap))

    driver = wait_for("running driver pod", lambda: running(c, "driver"), timeout=600, every=2)
    assert driver[0]["spec"]["nodeName"]
    # 2 partitions, 1 core per executor: 2 executors, started by the driver from the runtime image.
    wait_for("2 executors", lambda: executors_follow(c, 2), timeout=600, every=2)
    assert {p["spec"]["containers"][0]["image"] for p in running(c, "executor")} == {f"streamapp/runtime:{image_tag()}"}
    assert_outputs_exact(c, timeout=900)
    # The malformed record: read back after the batch that counted it, written to the dead-letter
    # topic and counted (the driver is replaced two tests on, so its count must be scraped by then).
    wait_for("the malformed record dead-lettered and counted", lambda: prometheus.query(
        f'streamapp_dead_letter_records_total{{namespace="{NS}", app="{APP}"}} >= 1'), timeout=120, every=5)


def streaming_page(port: int) -> str | NotYet:
    """Spark UI's Structured Streaming page (the driver registers it with its first query)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/StreamingQuery/", timeout=10) as page:
            return page.read().decode()
    except OSError as e:
        return NotYet(f"Spark UI: {e}")


def test_spark_ui_answers_through_its_service_and_lists_the_apps_queries(operator):
    """What docs/operator.md tells a user to do: `kubectl port-forward svc/<app>-ui 4040`, then open
    the Structured Streaming page; status.uiURL names that Service."""
    c = operator
    assert app_object(c)["status"]["uiURL"] == f"http://{APP}-ui.{NS}.svc:4040"
    queries = {query_name_of(sink) for sink in manifest(c.kafka_bootstrap)["spec"]["sinks"]}
    assert len(queries) >= 2
    with c.port_forward(NS, f"svc/{APP}-ui", 4040) as port:
        page = wait_for("the Structured Streaming page", lambda: streaming_page(port), timeout=60, every=2)
        cells = set(re.findall(r">\s*([^<>]+?)\s*<", page))  # the names are table cells: <td>name</td>
        assert "Active Streaming Queries" in page and not queries - cells, (sorted(queries), page)


AUTH_DIR = "/var/run/secrets/streamapp.io/spark-auth"


def test_spark_traffic_is_authenticated_with_the_apps_own_key_and_the_pods_are_fenced(operator):
    """What a user checks of issue 18 §2 on the running app: the driver's Spark settings, the key file
    readable by Spark's user in the driver and in every executor (nothing in their environment), the
    driver's Role limited to pods, the app's NetworkPolicy. (The outputs of the test before prove
    that executors with the key join and work; tests/runtime/test_spark_auth.py that one without
    it cannot.)"""
    import base64
    import json

    c = operator
    config = json.loads(c.kubectl("get", "configmap", f"{APP}-config", "-n", NS, "-o", "json").stdout)
    props = dict(line.split("=", 1) for line in config["data"]["spark.properties"].splitlines() if "=" in line)
    assert props["spark.authenticate"] == "true" and props["spark.network.crypto.enabled"] == "true"
    assert props["spark.authenticate.secret.file"] == f"{AUTH_DIR}/secret"
    secret = json.loads(c.kubectl("get", "secret", f"{APP}-spark-auth", "-n", NS, "-o", "json").stdout)
    assert len(base64.b64decode(secret["data"]["secret"])) == 32
    assert secret["metadata"]["ownerReferences"][0]["name"] == APP
    for pod in running(c, "driver") + running(c, "executor"):
        name = pod["metadata"]["name"]
        container = pod["spec"]["containers"][0]
        assert "_SPARK_AUTH_SECRET" not in {e["name"] for e in container.get("env", [])}, name
        assert AUTH_DIR in {m["mountPath"] for m in container["volumeMounts"]}, name
        size = c.kubectl("exec", "-n", NS, name, "-c", container["name"], "--",
                         "sh", "-c", f"id -u; wc -c < {AUTH_DIR}/secret").stdout.split()  # fmt: skip
        assert size == ["185", "32"], (name, size)
    role = json.loads(c.kubectl("get", "role", f"{APP}-driver", "-n", NS, "-o", "json").stdout)
    assert {r for rule in role["rules"] for r in rule["resources"]} == {"pods"}
    policy = json.loads(c.kubectl("get", "networkpolicy", f"{APP}-spark", "-n", NS, "-o", "json").stdout)
    assert policy["spec"]["podSelector"]["matchLabels"] == {"streamapp.io/app": APP}


def test_driver_pod_force_deleted_new_driver_resumes_from_the_checkpoint(operator):
    c = operator
    old = driver_uid(c)
    c.kubectl("delete", "pod", "-n", NS, "-l", f"streamapp.io/app={APP},streamapp.io/component=driver",
              "--grace-period=0", "--force")  # fmt: skip
    produce_round(c, 1)  # while no driver runs
    wait_for("a new running driver", lambda: new_driver(c, old), timeout=600, every=2)
    assert_outputs_exact(c)
    assert app_object(c)["status"]["lastRestart"]["reason"] == "DriverDeleted"


def test_driver_jvm_killed_inside_the_pod_new_driver_resumes_from_the_checkpoint(operator):
    c = operator
    pod = running(c, "driver")[0]
    old, restarts = pod["metadata"]["uid"], app_object(c)["status"].get("restarts", 0)
    # SIGKILL to the JVM (what the kernel's OOM killer would pick). PID 1 is the Python driver,
    # which a signal from inside its own PID namespace cannot SIGKILL.
    c.kubectl("exec", "-n", NS, pod["metadata"]["name"], "-c", "driver", "--",
              "sh", "-c", "kill -9 $(pgrep -x java)")  # fmt: skip
    produce_round(c, 2)
    wait_for("a new running driver", lambda: new_driver(c, old), timeout=600, every=2)
    status = app_object(c)["status"]
    assert status["restarts"] == restarts + 1
    assert status["lastRestart"]["reason"] == "DriverFailed" and status["lastRestart"].get("exitCode") not in (None, 0)
    assert_outputs_exact(c)


def test_suspend_stops_every_pod_and_resume_continues_from_the_checkpoint(operator):
    c = operator
    old = driver_uid(c)
    c.kubectl("patch", "streamapp", APP, "-n", NS, "--type=merge", "-p", '{"spec": {"suspend": true}}')
    wait_for("a suspended app without pods",
             lambda: app_object(c)["status"].get("phase") == "Suspended"
             and not running(c, "driver") and not running(c, "executor"), timeout=300, every=2)  # fmt: skip
    produce_round(c, 3)  # while suspended
    c.kubectl("patch", "streamapp", APP, "-n", NS, "--type=merge", "-p", '{"spec": {"suspend": false}}')
    wait_for("a new running driver", lambda: new_driver(c, old), timeout=600, every=2)
    assert_outputs_exact(c)


def in_place(c, count: int, driver: dict):
    """True once `count` executors run and the app reports them, the rescale recorded as applied in
    place by the same driver pod (same UID, its container never restarted); else what is seen."""
    seen = executors_follow(c, count)
    if seen is not True:
        return seen
    status = app_object(c)["status"]
    last = (status.get("scaling") or {}).get("lastRescale") or {}
    if last.get("to") != count or last.get("method") != "InPlace" or not last.get("appliedTime"):
        return NotYet(f"lastRescale={last}")
    now = running(c, "driver")
    assert [p["metadata"]["uid"] for p in now] == [driver["metadata"]["uid"]], "the driver was replaced"
    assert sum(s.get("restartCount", 0) for s in now[0]["status"].get("containerStatuses") or []) == 0
    return True


def driver_log(c, driver: dict) -> str:
    return c.kubectl("logs", "-n", NS, driver["metadata"]["name"], "-c", "driver").stdout


def test_executors_follow_partitions_added_to_the_source_topic_in_place(operator):
    c = operator
    driver = running(c, "driver")[0]
    restarts = app_object(c)["status"].get("restarts", 0)
    kafka_admin.add_partitions(c.kafka_bootstrap, TOPIC, 3)
    wait_for("3 executors in place", lambda: in_place(c, 3, driver), timeout=600, every=2)
    assert app_object(c)["status"]["partitions"] == 3
    produce_round(c, 4)  # now spread over 3 partitions
    assert app_object(c)["status"].get("restarts", 0) == restarts
    assert_outputs_exact(c)


def test_executors_follow_kubectl_scale_down_and_up_in_place(operator):
    """`kubectl scale` 3 → 1 → 2 while clicks keep coming: the surplus executors are decommissioned
    and their pods go, Spark asks for new ones, no query is restarted, both sinks stay exact."""
    c = operator
    driver = running(c, "driver")[0]
    started = driver_log(c, driver).count("started query")
    assert started >= 2
    restarts = app_object(c)["status"].get("restarts", 0)
    for n, count in ((5, 1), (6, 2)):
        c.kubectl("scale", "streamapp", APP, "-n", NS, f"--replicas={count}")
        assert app_object(c)["spec"]["executors"] == count
        # LATE is behind the watermark: dropped, counted
        produce_round(c, n, extra=(LATE.to_json(),) if n == 5 else ())
        wait_for(f"{count} executors in place", lambda: in_place(c, count, driver), timeout=600, every=2)
        assert app_object(c)["status"].get("restarts", 0) == restarts
        assert_outputs_exact(c)
    log = driver_log(c, driver)
    assert "restarted query" not in log and log.count("started query") == started, "a query was restarted"
    assert log.count("rescale in place: ") >= 3, log[-3000:]  # 2 -> 3, 3 -> 1, 1 -> 2
    events = c.kubectl("get", "events", "-n", NS, "--field-selector", f"involvedObject.name={APP}",
                       "-o", "jsonpath={range .items[*]}{.reason}{' '}{end}").stdout.split()  # fmt: skip
    assert "Rescaled" in events and "RescaleFallback" not in events, events


def dashboard_metrics() -> set[str]:
    text = (REPO / "charts" / "streamapp-operator" / "dashboards" / "streamapp.json").read_text()
    return set(re.findall(r"\b(streamapp_[a-z_]+)\{", text))


def test_prometheus_scraped_operator_and_driver_and_has_every_dashboard_metric(operator, prometheus):
    # Both monitors' targets answered during the session (the driver's through its restarts).
    for job in prometheus.monitor_jobs:
        assert prometheus.query(f'max_over_time(up{{job="{job}"}}[1h]) == 1'), (job, prometheus.targets())
    names = dashboard_metrics()
    assert len(names) >= 12
    missing = {}
    for name in sorted(names):
        # Over the whole session: counters of an earlier driver (late rows, dead letters) count too.
        if not prometheus.query(f'last_over_time({name}{{namespace="{NS}", app="{APP}"}}[1h])'):
            missing[name] = prometheus.query(f"count by (namespace, app, job) (last_over_time({name}[1h]))")
    assert not missing, f"dashboard metrics without a series for {NS}/{APP}: {missing}"
    for name in ("streamapp_dead_letter_records_total", "streamapp_late_rows_dropped_total"):
        assert prometheus.query(f'last_over_time({name}{{namespace="{NS}", app="{APP}"}}[1h]) >= 1'), name
    restarts = prometheus.query(
        f'max(last_over_time(streamapp_operator_driver_restarts_total{{namespace="{NS}", app="{APP}"}}[1h]))')
    assert float(restarts[0]["value"][1]) >= 2  # the force-deleted and the killed driver
