"""One set of Kafka credentials, two clients (streamapp_api.kafka_credentials, docs/kafka.md): what the
Java client (Spark's source and sink) and librdkafka (the runtime's and the operator's own clients)
are told for each mechanism, from either flavour of a Secret's keys."""

from __future__ import annotations

import re

import pytest

from streamapp_api import Policy, contract, load
from streamapp_api.kafka_credentials import (CredentialsError, jaas_credentials, java_options, librdkafka_options,
                                             refused_credentials, secret_options)
from streamapp_api.policy import kafka_secret_issues

pytestmark = pytest.mark.unit

CA, CERT, KEY = "-----BEGIN CERTIFICATE-----\nca\n", "-----BEGIN CERTIFICATE-----\nme\n", "-----BEGIN PRIVATE KEY-----\nk\n"
PLAIN_JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="key" password="s3cret";'
SCRAM_JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="pw";'
TRUST = {"ssl.truststore.type": "PEM", "ssl.truststore.certificates": CA}
KEYSTORE = {"ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": CERT, "ssl.keystore.key": KEY}

# name: (the Secret's keys, the Java client's options, librdkafka's options)
CASES = {
    "PLAIN, public CA (Confluent Cloud)": (
        {"sasl.mechanism": "PLAIN", "sasl.username": "key", "sasl.password": "s3cret"},
        {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.jaas.config": PLAIN_JAAS},
        {"security.protocol": "SASL_SSL", "sasl.mechanisms": "PLAIN", "sasl.username": "key", "sasl.password": "s3cret"}),
    "SCRAM-SHA-512 with the cluster's CA (Strimzi)": (
        {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "alice",
         "sasl.password": "pw", "ssl.ca.pem": CA},
        {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config": SCRAM_JAAS, **TRUST},
        {"security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": "alice",
         "sasl.password": "pw", "ssl.ca.pem": CA}),
    "SCRAM-SHA-256, environment-style keys": (
        {"SECURITY_PROTOCOL": "SASL_SSL", "SASL_MECHANISM": "SCRAM-SHA-256", "SASL_USERNAME": "alice",
         "SASL_PASSWORD": "pw"},
        {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256", "sasl.jaas.config": SCRAM_JAAS},
        {"security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-256", "sasl.username": "alice",
         "sasl.password": "pw"}),
    "SCRAM given the Java way: the JAAS line is read for librdkafka": (
        {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config": SCRAM_JAAS, **TRUST},
        {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config": SCRAM_JAAS, **TRUST},
        {"security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": "alice",
         "sasl.password": "pw", "ssl.ca.pem": CA}),
    "mTLS": (
        {"security.protocol": "SSL", "ssl.ca.pem": CA, "ssl.certificate.pem": CERT, "ssl.key.pem": KEY},
        {"security.protocol": "SSL", **TRUST, **KEYSTORE},
        {"security.protocol": "SSL", "ssl.ca.pem": CA, "ssl.certificate.pem": CERT, "ssl.key.pem": KEY}),
    "mTLS, an encrypted key, no protocol (SSL is implied)": (
        {"ssl.ca.pem": CA, "ssl.certificate.pem": CERT, "ssl.key.pem": KEY, "ssl.key.password": "kp"},
        {"security.protocol": "SSL", **TRUST, **KEYSTORE, "ssl.key.password": "kp"},
        {"security.protocol": "SSL", "ssl.ca.pem": CA, "ssl.certificate.pem": CERT, "ssl.key.pem": KEY,
         "ssl.key.password": "kp"}),
    "mTLS given the Java way": (
        {"security.protocol": "SSL", **TRUST, **KEYSTORE},
        {"security.protocol": "SSL", **TRUST, **KEYSTORE},
        {"security.protocol": "SSL", "ssl.ca.pem": CA, "ssl.certificate.pem": CERT, "ssl.key.pem": KEY}),
    "TLS without hostname verification": (
        {"security.protocol": "SSL", "ssl.ca.pem": CA, "ssl.endpoint.identification.algorithm": "none"},
        {"security.protocol": "SSL", **TRUST, "ssl.endpoint.identification.algorithm": ""},
        {"security.protocol": "SSL", "ssl.ca.pem": CA, "ssl.endpoint.identification.algorithm": "none"}),
    "OAUTHBEARER: passed as given, nothing derived": (
        {"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
         "sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"},
        {"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
         "sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"},
        {"security.protocol": "SASL_SSL", "sasl.mechanisms": "OAUTHBEARER"}),
    "no credentials": ({}, {}, {}),
}


@pytest.mark.parametrize("secret, java, librdkafka", CASES.values(), ids=CASES.keys())
def test_each_client_gets_what_it_takes_from_one_set(secret, java, librdkafka):
    options = secret_options(secret)
    assert java_options(options) == java
    assert librdkafka_options(options) == librdkafka
    # The runtime gives Spark the Java options and derives its own clients' from them: the same.
    assert librdkafka_options(java_options(options)) == librdkafka


def test_the_driver_reads_the_secret_from_its_environment_as_the_operator_reads_the_secret():
    secret = {"SASL_USERNAME": "alice", "sasl.password": "pw", "sasl.mechanism": "SCRAM-SHA-512"}
    environ = {f"{contract.ENV_KAFKA_PREFIX}{key}": value for key, value in secret.items()}
    assert contract.kafka_env_options(environ) == secret_options(secret)


@pytest.mark.parametrize("username, password", [
    ('al"ice', 'p"w\\x'),
    ("alice", '"; org.example.Evil required x="'),
])
def test_a_built_jaas_line_keeps_each_value_inside_its_quotes(username, password):
    jaas = java_options({"sasl.mechanism": "PLAIN", "sasl.username": username, "sasl.password": password})
    line = jaas["sasl.jaas.config"]
    unescaped_quotes = len(re.findall(r'(?<!\\)"', line.replace("\\\\", "")))
    assert unescaped_quotes == 4 and line.endswith('";'), line


def test_a_jaas_line_with_escaped_quotes_reads_back():
    jaas = java_options({"sasl.mechanism": "PLAIN", "sasl.username": 'al"ice', "sasl.password": 'p"w\\x'})
    assert jaas_credentials(jaas["sasl.jaas.config"]) == ('al"ice', 'p"w\\x')


@pytest.mark.parametrize("secret, says", [
    ({"security.protocol": "SASL_SSL", "sasl.username": "a", "sasl.password": "p"}, "needs sasl.mechanism"),
    ({"sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "a"}, "needs sasl.username and sasl.password"),
    ({"sasl.mechanism": "PLAIN", "sasl.username": "a", "sasl.password": "p\n"}, "line break"),
    ({"ssl.certificate.pem": CERT}, "both ssl.certificate.pem and ssl.key.pem"),
    ({"security.protocol": "TLS"}, "is not one of"),
])
def test_credentials_that_cannot_be_put_together_say_what_to_fix(secret, says):
    with pytest.raises(CredentialsError, match=says):
        java_options(secret)


@pytest.mark.parametrize("jaas", [
    'com.sun.security.auth.module.Krb5LoginModule required username="a" password="b";',
    'org.apache.kafka.common.security.plain.PlainLoginModule required username="a";',
])
def test_only_a_plain_or_scram_jaas_line_with_both_values_is_read(jaas):
    assert jaas_credentials(jaas) is None


def test_every_key_of_the_neutral_set_passes_the_default_policy():
    app = load({"apiVersion": "streamapp.io/v1alpha1", "kind": "StreamApp", "metadata": {"name": "a"}, "spec": {
        "kafka": {"bootstrapServers": "k:9093", "secretRef": {"name": "creds"}},
        "sources": [{"name": "s", "topic": "t", "format": "string"}], "sinks": [{"from": "s", "kafka": {"topic": "o"}}]}})
    neutral = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "u",
               "sasl.password": "p", "ssl.ca.pem": CA, "ssl.certificate.pem": CERT, "ssl.key.pem": KEY,
               "ssl.key.password": "kp", "SSL_ENDPOINT_IDENTIFICATION_ALGORITHM": "none"}
    java = {**TRUST, **KEYSTORE, "sasl.jaas.config": SCRAM_JAAS}
    assert kafka_secret_issues(app, {**neutral, **java}, Policy()) == []


@pytest.mark.parametrize("line, refusal", [
    ("[thrd:sasl_ssl://k:9093/bootstrap]: sasl_ssl://k:9093/bootstrap: SASL authentication error: Authentication "
     "failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512",
     "sasl_ssl://k:9093/bootstrap: SASL authentication error: Authentication failed during authentication due to "
     "invalid credentials with SASL mechanism SCRAM-SHA-512"),
    ("[thrd:ssl://k:9094/bootstrap]: ssl://k:9094/bootstrap: Receive failed: error:0A000412:SSL routines::ssl/tls "
     "alert bad certificate: SSL alert number 42", "ssl://k:9094/bootstrap: Receive failed: error:0A000412:SSL "
     "routines::ssl/tls alert bad certificate: SSL alert number 42"),
    ("[thrd:k:9092/bootstrap]: k:9092/bootstrap: Connect to ipv4#10.0.0.1:9092 failed: Connection refused", None),
])
def test_librdkafkas_log_tells_refused_credentials_from_a_broker_out_of_reach(line, refusal):
    assert refused_credentials(line) == refusal
