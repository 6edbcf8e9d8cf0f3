"""The cluster's policy: what a StreamApp author may run (docs/security.md).

Attack manifests live in tests/manifests/attacks/, one escape each, with the same header as
tests/manifests/invalid/ (expect, refused-by, message, why). `streamapp validate` refuses every one
under the default policy; tests/operator/test_operator_admission.py applies them to the real API
server through the admission webhook.
"""

import pytest
import yaml
from test_api_manifests import assert_refused_naming_the_field

from streamapp_api import InvalidSpec, Policy, check_policy, contract, load, validate
from streamapp_api.policy import image_allowed
from streamapp_testbed.manifests import header, manifests

pytestmark = pytest.mark.unit
ATTACKS = manifests("attacks")
BASE = ATTACKS[0]


def app_with(**spec) -> dict:
    document = yaml.safe_load(BASE.read_text())
    document["spec"].pop("image", None)
    document["spec"].update(spec)
    return document


def test_at_least_25_attacks_each_a_different_escape():
    assert len(ATTACKS) >= 25
    escapes = [(header(p)["expect"], yaml.safe_load(p.read_text())["spec"].get("image")) for p in ATTACKS]
    assert len(set(escapes)) == len(escapes), "each attack is a different escape"


@pytest.mark.parametrize("path", ATTACKS, ids=lambda p: p.stem)
def test_attack_is_refused_naming_the_field_and_why(path):
    assert_refused_naming_the_field(path, refused_by=("validate",))


@pytest.mark.parametrize("path", ATTACKS, ids=lambda p: p.stem)
def test_attack_is_the_only_thing_wrong(path):
    """Each manifest is a valid app but for its one escape: an admin who allows everything accepts it."""
    everything = Policy.from_mapping({"images": ["*"], "sparkConf": {"allow": ["*"]}, "functions": {"refuse": []},
                                      "kafkaOptions": {"allow": ["*"]}})
    document = yaml.safe_load(path.read_text())
    errors = [str(i) for i in validate(document, everything) if i.severity == "error"]
    credential = header(path)["message"] in ("looks like a credential", "credential in plain text")
    assert bool(errors) == credential, errors  # plain-text credentials are refused whatever the policy


@pytest.mark.parametrize("image, prefixes, allowed", [
    ("streamapp/runtime:0.1.0", ("streamapp/runtime",), True),
    ("streamapp/runtime@sha256:abc", ("streamapp/runtime",), True),
    ("streamapp/runtime", ("streamapp/runtime",), True),
    ("streamapp/runtime-evil:1", ("streamapp/runtime",), False),
    ("streamapp/runtimeevil", ("streamapp/runtime",), False),
    ("registry.example/team/runtime:2", ("registry.example/team/",), True),
    ("registry.example/other/runtime:2", ("registry.example/team/",), False),
    ("anything:1", ("*",), True),
    ("streamapp/runtime:1", (), False),
])
def test_image_prefixes(image, prefixes, allowed):
    assert image_allowed(image, prefixes) is allowed


@pytest.mark.parametrize("key", [
    "spark.ui.enabled", "spark.sql.session.timeZone", "spark.kubernetes.executor.request.cores",
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled", "spark.memory.fraction",
    "spark.sql.adaptive.enabled", "spark.network.timeout",
])
def test_safe_spark_settings_pass(key):
    assert check_policy(load(app_with()), Policy()) == []
    assert [str(i) for i in validate(app_with(sparkConf={key: "1"}), Policy())] == []


@pytest.mark.parametrize("key", ["spark.sql.streaming.streamingQueryListeners",
                                 "spark.sql.streaming.checkpointFileManagerClass"])
def test_code_loading_keys_under_safe_prefixes_are_refused(key):
    issues = validate(app_with(sparkConf={key: "com.evil.X"}), Policy())
    assert [i.path for i in issues] == [f"spec.sparkConf[{key}]"] and "loads code" in issues[0].message


@pytest.mark.parametrize("key", ["spark.hadoop.fs.s3a.access.key", "spark.hadoop.fs.s3a.secret.key",
                                 "spark.hadoop.fs.s3a.session.token", "spark.hadoop.fs.s3a.bucket.ckpt.secret.key"])
def test_s3_key_pairs_are_refused_whatever_the_policy_pointing_at_the_secret_ref(key):
    everything = Policy.from_mapping({"sparkConf": {"allow": ["*"]}})
    issues = validate(app_with(sparkConf={key: "plain"}), everything)
    assert [i.path for i in issues] == [f"spec.sparkConf[{key}]"]
    assert "spec.state.checkpoint.s3.secretRef" in issues[0].message


def test_an_admin_allows_more():
    document = app_with(image="registry.example/team/runtime:2",
                        sparkConf={"spark.kubernetes.node.selector.pool": "streaming", "spark.jars.packages": "a:b:1"},
                        kafka={"bootstrapServers": "kafka:9092",
                               "options": {"sasl.oauthbearer.token.endpoint.url": "https://idp.example/token"}})
    refused = {i.path for i in validate(document, Policy())}
    assert refused == {"spec.image", "spec.sparkConf[spark.kubernetes.node.selector.pool]",
                       "spec.sparkConf[spark.jars.packages]", "spec.kafka.options[sasl.oauthbearer.token.endpoint.url]"}
    policy = Policy.from_mapping({"images": ["registry.example/team/"],
                                  "sparkConf": {"allow": ["spark.kubernetes.node.selector.*", "spark.jars.packages"]},
                                  "kafkaOptions": {"allow": ["sasl.oauthbearer.token.endpoint.url"]}})
    assert validate(document, policy) == []


def test_refused_functions_are_the_policys():
    document = app_with(streams=[{"name": "s", "from": "clicks", "steps": [{"filter": "upper(user) = 'A'"}]}],
                        sinks=[{"from": "s", "kafka": {"topic": "out"}}])
    assert validate(document, Policy()) == [] and validate(document) == []
    issues = validate(document, Policy.from_mapping({"functions": {"refuse": ["UPPER"]}}))
    assert [(i.path, "upper()" in i.message) for i in issues] == [("spec.streams[0].steps[0].filter", True)]


def test_a_policy_file_with_a_typo_is_refused_naming_it(tmp_path):
    path = tmp_path / "policy.yaml"
    path.write_text("images: [streamapp/runtime]\nsparkConf:\n  alow: [spark.jars]\n")
    with pytest.raises(InvalidSpec, match=r"sparkConf\.alow"):
        Policy.from_file(path)


def test_the_operators_kafka_client_takes_only_safe_options():
    given = {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.username": "u", "sasl.password": "p",
             "plugin.library.paths": "/tmp/x.so", "ssl.engine.location": "/tmp/e.so", "sasl.kerberos.kinit.cmd": "sh",
             "ssl.ca.location": "/etc/shadow", "sasl.oauthbearer.token.endpoint.url": "http://169.254.169.254/"}
    assert contract.admin_client_options(given) == {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.username": "u", "sasl.password": "p"}


def test_the_api_alone_applies_no_policy():
    """The driver's runtime loads the app without a policy: what an admin allowed must also run."""
    document = app_with(image="registry.example/team/runtime:2", sparkConf={"spark.jars.packages": "a:b:1"})
    assert load(document).spec.image == "registry.example/team/runtime:2"
    assert {i.path for i in validate(document, Policy())} == {"spec.image", "spec.sparkConf[spark.jars.packages]"}
