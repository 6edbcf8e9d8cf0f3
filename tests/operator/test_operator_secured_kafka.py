"""The operator's Kafka client on the test bed broker's secured listeners (SASL_SSL with SCRAM-SHA-512,
and SSL with a client certificate): partition counts through the credentials of the app's Secret,
given once in the neutral keys, and a refused password named in status as KafkaAuthFailed."""

from __future__ import annotations

import base64

import pytest

from streamapp_api import load
from streamapp_operator.observe.kafka import PartitionCache, observe
from streamapp_testbed.kafka_admin import create_topic
from streamapp_testbed.waiting import wait_for
from streamapp_testkit.operator_bed import simple_app, unique

pytestmark = pytest.mark.integration


def _secured_app(bootstrap: str, topic: str, secret: str = "kafka-auth"):
    doc = simple_app("app", "ns", bootstrap, topic)
    doc["spec"]["kafka"]["secretRef"] = {"name": secret}
    return load(doc)


@pytest.mark.parametrize("listener", ["sasl", "mtls"])
def test_partition_counts_through_the_secrets_credentials(kafka, listener):
    topic = unique("in")
    create_topic(kafka.bootstrap, topic, partitions=3)
    # The keys as a Secret may name them: environment style for one, dotted for the rest.
    secret = {("SASL_PASSWORD" if key == "sasl.password" else key): value
              for key, value in kafka.credentials(listener).items()}
    app = _secured_app(kafka.listener(listener), topic)
    seen = observe(app, secret, cache=PartitionCache())
    assert (seen.error, seen.partitions, seen.by_topic) == (None, 3, ((topic, 3),))


@pytest.mark.parametrize("listener, wrong", [
    ("sasl", {"sasl.password": "not-the-password"}),
    ("mtls", {"ssl.certificate.pem": None, "ssl.key.pem": None}),  # no client certificate
])
def test_refused_credentials_are_named_not_unreachable(kafka, listener, wrong):
    secret = {k: v for k, v in {**kafka.credentials(listener), **wrong}.items() if v is not None}
    seen = observe(_secured_app(kafka.listener(listener), "any", "team-kafka"), secret, timeout=5)
    assert seen.auth_failed and seen.partitions is None, seen
    assert "refused the credentials of Secret team-kafka (spec.kafka.secretRef)" in seen.error, seen.error
    assert "unreachable" not in seen.error


def _secret(cluster, name: str, credentials: dict[str, str]) -> None:
    cluster.apply({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": cluster.namespace},
                   "data": {k: base64.b64encode(v.encode()).decode() for k, v in credentials.items()}})


def test_partitions_through_the_secret_and_a_wrong_password_is_KafkaAuthFailed_in_status(cluster, kafka):
    topic = unique("in")
    create_topic(kafka.bootstrap, topic, partitions=2)
    _secret(cluster, "good-kafka", kafka.credentials("mtls"))
    _secret(cluster, "team-kafka", {**kafka.credentials("sasl"), "sasl.password": "not-the-password"})
    for name, bootstrap, secret in (("good", kafka.mtls_bootstrap, "good-kafka"),
                                    ("app", kafka.sasl_bootstrap, "team-kafka")):
        doc = simple_app(name, cluster.namespace, bootstrap, topic)
        doc["spec"]["kafka"]["secretRef"] = {"name": secret}
        cluster.apply(doc)

    condition = wait_for("Degraded KafkaAuthFailed", lambda: (
        (c := cluster.condition("app", "Degraded")).get("reason") == "KafkaAuthFailed" and c), timeout=60)
    assert "Secret team-kafka" in condition["message"] and "SASL authentication" in condition["message"], condition
    assert cluster.status("app")["reason"] == "KafkaAuthFailed"
    assert cluster.event("app", "KafkaAuthFailed")
    assert cluster.driver("app") is None
    wait_for("the partitions read through the good Secret", lambda: cluster.status("good").get("partitions") == 2)
    assert cluster.condition("good", "Degraded").get("status") != "True", cluster.status("good")
