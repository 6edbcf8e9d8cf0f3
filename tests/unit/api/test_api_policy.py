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
from streamapp_api.validate_cli import check_text
from streamapp_api.policy import image_allowed, kafka_secret_issues, places
from streamapp_api.policy import kafka as policy_kafka
from streamapp_api.policy import spark as policy_spark
from streamapp_api.policy.images import parse_image
from streamapp_testbed.manifests import header, manifests

pytestmark = pytest.mark.unit
ATTACKS = manifests("attacks")
BASE = ATTACKS[0]


def app_with(**spec) -> dict:
    document = yaml.safe_load(BASE.read_text())
    document["spec"].pop("image", None)
    document["spec"].update(spec)
    return document


def test_at_least_80_attacks_each_a_different_escape():
    assert len(ATTACKS) >= 80
    escapes = [(header(p)["expect"], header(p)["why"]) for p in ATTACKS]
    assert len(set(escapes)) == len(escapes), "each attack is a different escape"


@pytest.mark.parametrize("path", ATTACKS, ids=lambda p: p.stem)
def test_attack_is_refused_naming_the_field_and_why(path):
    assert_refused_naming_the_field(path, refused_by=("validate", "apiserver", "yaml"))


@pytest.mark.parametrize("path", ATTACKS, ids=lambda p: p.stem)
def test_attack_is_the_only_thing_wrong(path):
    """Each manifest is a valid app but for its one escape: an admin who allows everything accepts it."""
    fields = header(path)
    if fields["refused-by"] == "yaml":  # not a manifest to validate: the file itself is refused
        (report,) = check_text(path.read_text(), path.name, EVERYTHING)
        assert report.errors and fields["policy"] == "refused whatever the policy"
        return
    document = yaml.safe_load(path.read_text())
    errors = [str(i) for i in validate(document, EVERYTHING) if i.severity == "error"]
    whatever = fields.get("policy") == "refused whatever the policy" or fields["message"] in WHATEVER_THE_POLICY
    assert bool(errors) == whatever, errors


EVERYTHING = Policy.from_mapping({
    "images": ["*"], "sparkConf": {"allow": ["*"]}, "functions": {"refuse": []}, "kafkaOptions": {"allow": ["*"]},
    "checkpoints": {"locations": []}, "tables": {"locations": ["s3a://*"]}, "endpoints": {"allow": ["*"]},
    "pods": {"nodeSelector": {"refuse": []}, "tolerations": {"refuse": [], "everyTaint": True},
             "annotations": {"refuse": []}, "labels": {"refuse": []}},
    "userCode": {"namespaces": ["*"], "modules": ["*"], "configMaps": ["*"]}})
# What no policy lifts (the attack's `message`, or a header line `# policy: refused whatever the policy`):
# credentials in the spec (it is copied into a ConfigMap), keys that only differ by spaces or case from the
# operator's and Spark's own, '${' references Spark expands, locations outside the app's own
# /<namespace>/<name> or with segments stores fold, writes to Kafka's internal topics; and hosts that are
# never an endpoint unless an admin names that very host (endpoints.allow).
WHATEVER_THE_POLICY = (
    "looks like a credential", "credential in plain text", "has spaces around it", "managed by Spark",
    "Spark replaces", "is not the app's own", "'..' path segment", "empty, '.' or '..'", "no %-encoding", "backslash",
    "path segment with other characters", "internal topic", "link-local", "loopback", "metadata", "user info",
)


@pytest.mark.parametrize("image, prefixes, allowed", [
    ("streamapp/runtime:0.1.0", ("streamapp/runtime",), True),
    ("streamapp/runtime@sha256:" + "ab" * 32, ("streamapp/runtime",), True),
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
        "security.protocol": "SASL_SSL", "sasl.mechanisms": "PLAIN", "sasl.username": "u", "sasl.password": "p"}


def test_the_api_alone_applies_no_policy():
    """The driver's runtime loads the app without a policy: what an admin allowed must also run."""
    document = app_with(image="registry.example/team/runtime:2", sparkConf={"spark.jars.packages": "a:b:1"})
    assert load(document).spec.image == "registry.example/team/runtime:2"
    assert {i.path for i in validate(document, Policy())} == {"spec.image", "spec.sparkConf[spark.jars.packages]"}


# --- Kafka client options: canonical keys, an allow-list, the Secret behind secretRef ---------------------

@pytest.mark.parametrize("key, value, refused", [
    ("security.protocol", "SASL_SSL", None),
    ("Security.Protocol", "SASL_SSL", None),  # the client reads it lower-case: a safe option still
    ("default.api.timeout.ms", "10000", None),
    ("ssl.truststore.certificates", "-----BEGIN CERTIFICATE-----", None),  # public
    ("ssl.keystore.certificate.chain", "-----BEGIN CERTIFICATE-----", None),  # public
    ("Config.Providers", "file", "loads code"),
    ("SECURITY.PROVIDERS", "x.Creator", "loads code"),
    ("sasl.\u212aerberos.kinit.cmd", "sh", "loads code"),  # Kelvin sign: 'k' once lower-cased
    ("ssl.engine.id", "dynamic", "loads code"),
    ("sasl.oauthbearer.token.endpoint.url", "file:///etc/passwd", "fetch from a URL"),
    ("ssl.ca.location", "/etc/shadow", "reads a file"),
    ("socket.keepalive.enable", "true", "not on the operator's list of safe Kafka client options"),
    ("bootstrap.servers", "evil:9092", "use spec.kafka.bootstrapServers"),
    ("ssl.keystore.key", "-----BEGIN PRIVATE KEY-----", "credential in plain text"),
    ("SSL.Key.Pem", "-----BEGIN PRIVATE KEY-----", "credential in plain text"),
    ("ssl.key.password", "x", "credential in plain text"),
    ("sasl.jaas.config", "x required;", "credential in plain text"),
    ("GROUP.ID", "g", "managed by Spark"),
    (" config.providers", "file", "has spaces around it"),
    ("config\u00a0providers", "file", "characters other than"),
    ("client.id", "${file:/etc/passwd:x}", "holds '${'"),
])
def test_kafka_option_keys_are_judged_as_the_client_reads_them(key, value, refused):
    issues = list(policy_kafka.option_issues({key: value}, ()))
    assert [i.path for i in issues] == ([f"spec.kafka.options[{key}]"] if refused else [])
    assert refused is None or refused in issues[0].message, issues


def test_two_spellings_of_one_kafka_option_are_refused():
    issues = list(policy_kafka.option_issues({"linger.ms": "5", "LINGER.MS": "500"}, ()))
    assert [i.path for i in issues] == ["spec.kafka.options[LINGER.MS]"] and "same option" in issues[0].message


def test_kafka_allow_globs_compare_canonical_keys():
    assert list(policy_kafka.option_issues({"SASL.OAuthBearer.Token.Endpoint.Url": "https://idp/t"},
                                           ("sasl.oauthbearer.TOKEN.endpoint.url",))) == []
    assert list(policy_kafka.option_issues({"client.id": "${file:/x:y}"}, ("config.providers",))) == []


@pytest.mark.parametrize("key, value, refused", [
    ("sasl.password", "p", None),  # credentials are what the Secret is for
    ("SASL_PASSWORD", "p", None),
    ("ssl.keystore.key", "-----BEGIN PRIVATE KEY-----", None),
    ("security.protocol", "SASL_SSL", None),
    ("sasl.jaas.config", 'org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="p";',
     None),
    ("sasl.jaas.config", "com.sun.security.auth.module.JndiLoginModule required user.provider.url=\"ldap://evil\";",
     "names login module"),
    ("sasl.jaas.config", "garbage", "names no login module"),
    ("CONFIG_PROVIDERS", "file", "loads code"),
    ("config.providers", "file", "loads code"),
    ("SASL_LOGIN_CALLBACK_HANDLER_CLASS", "com.evil.H", "loads code"),
    ("ssl_truststore_location", "/var/run/secrets/kubernetes.io/serviceaccount/token", "reads a file"),
    ("SASL_OAUTHBEARER_TOKEN_ENDPOINT_URL", "file:///etc/passwd", "fetch from a URL"),
    ("some.unknown.option", "1", "not on the operator's list"),
])
def test_the_kafka_secrets_keys_pass_the_same_policy_but_for_credentials(key, value, refused):
    issues = policy_kafka.secret_issues("kafka-client", {key: value}, ())
    assert [i.path for i in issues] == (["spec.kafka.secretRef"] if refused else [])
    if refused:
        assert refused in issues[0].message and repr(key) in issues[0].message and "'kafka-client'" in issues[0].message


def test_the_operator_checks_the_secret_its_app_names():
    app = load(app_with(kafka={"bootstrapServers": "k:9092", "secretRef": {"name": "creds"}}))
    assert kafka_secret_issues(app, {"sasl.password": "p"}) == []
    (issue,) = kafka_secret_issues(app, {"METRIC_REPORTERS": "com.evil.R"})
    assert issue.path == "spec.kafka.secretRef" and "'creds'" in issue.message and "METRIC_REPORTERS" in issue.message
    assert kafka_secret_issues(app, {"METRIC_REPORTERS": "x"}, Policy.from_mapping(
        {"kafkaOptions": {"allow": ["metric.reporters"]}})) == []
    assert kafka_secret_issues(load(app_with()), {"METRIC_REPORTERS": "x"}) == []  # no secretRef: nothing read


@pytest.mark.parametrize("topic, internal", [
    ("__consumer_offsets", True), ("__transaction_state", True), ("__cluster_metadata", True), ("_schemas", True),
    ("_confluent-command", True), ("_Schemas", True), ("clicks", False), ("_my_topic", False), ("a__b", False),
])
def test_kafka_internal_topics(topic, internal):
    assert policy_kafka.internal_topic(topic) is internal


# --- Spark settings under safe globs that still name code or places -----------------------------------------

@pytest.mark.parametrize("key, value, refused", [
    ("spark.io.compression.codec", "zstd", None),
    ("spark.io.compression.codec", "LZ4", None),
    ("spark.io.compression.zstd.level", "3", None),
    ("spark.io.compression.codec", "org.apache.spark.io.ZStdCompressionCodec", "codec's short name"),
    ("spark.sql.streaming.stateStore.compression.codec", "com.evil.C", "codec's short name"),
    ("spark.storage.decommission.fallbackStorage.path", "s3a://b/", "location of the author's choosing"),
    ("spark.python.worker.module", "evil", "loads code"),
    ("spark.sql.streaming.commitProtocolClass", "com.evil.C", "loads code"),
    ("spark.sql.streaming.disabledV2Writers", "a.B", "loads code"),
    ("spark.sql.session.timeZone", "${env:HOME}", "Spark replaces"),
    ("spark.ui.retainedJobs", "${system:user.home}", "Spark replaces"),
])
def test_spark_settings_that_name_code_or_places(key, value, refused):
    issues = list(policy_spark.spark_conf_issues({key: value}, ()))
    assert [i.path for i in issues] == ([f"spec.sparkConf[{key}]"] if refused else [])
    assert refused is None or refused in issues[0].message, issues


def test_dollar_brace_in_spark_conf_is_refused_whatever_the_policy():
    assert list(policy_spark.spark_conf_issues({"spark.io.compression.codec": "com.x.C"}, ("*",))) == []
    assert len(list(policy_spark.spark_conf_issues({"spark.x": "${env:A}"}, ("*",)))) == 1


# --- S3 endpoints and checkpoint locations ---------------------------------------------------------------

@pytest.mark.parametrize("host, canonical", [
    ("169.254.169.254", "169.254.169.254"), ("2852039166", "169.254.169.254"), ("0xA9FEA9FE", "169.254.169.254"),
    ("0xa9.0xfe.0xa9.0xfe", "169.254.169.254"), ("0251.0376.0251.0376", "169.254.169.254"),
    ("169.254.43518", "169.254.169.254"), ("169.16689662", "169.254.169.254"), ("169.254.169.254.", "169.254.169.254"),
    ("[::ffff:169.254.169.254]", "169.254.169.254"), ("[::ffff:a9fe:a9fe]", "169.254.169.254"),
    ("[64:ff9b::a9fe:a9fe]", "169.254.169.254"), ("[2002:a9fe:a9fe::1]", "169.254.169.254"),
    ("[FE80::1]", "[fe80::1]"), ("127.1", "127.0.0.1"), ("0", "0.0.0.0"),
    ("METADATA.Google.Internal.", "metadata.google.internal"), ("S3.Example.com", "s3.example.com"),
    ("08", "08"),  # not a number inet_aton reads: a name
])
def test_hosts_are_put_in_one_spelling(host, canonical):
    assert places.canonical_host(host)[0] == canonical


@pytest.mark.parametrize("endpoint, refused", [
    ("http://seaweedfs.storage:8333", None), ("https://s3.eu-west-1.amazonaws.com", None), ("http://10.0.0.5:9000", None),
    ("http://169.254.169.254", "link-local"), ("http://2852039166/", "link-local"), ("http://0xA9FEA9FE", "link-local"),
    ("http://[::ffff:169.254.169.254]:80", "link-local"), ("http://[fe80::a9fe:a9fe]", "link-local"),
    ("http://169.254.170.2/v2/credentials", "link-local"), ("http://127.0.0.1:4040", "loopback"),
    ("http://localhost:8333", "loopback"), ("http://[::1]", "loopback"), ("http://0.0.0.0:9000", "unspecified"),
    ("http://metadata/computeMetadata/v1", "metadata"), ("http://instance-data.", "metadata"),
    ("http://100.100.100.200", "metadata"), ("http://[fd00:ec2::254]", "metadata"),
    ("http://s3.example.com@169.254.169.254/", "user info"), ("http://169.254.169.254%2f", "%-encoded"),
    ("http://evil.example\\.s3.example.com", "backslash"), ("http://s3.ex\u0430mple.com", "not a host name"),
    ("http://s3.example.com:99999", "port"),
])
def test_s3_endpoints_never_reach_metadata_loopback_or_link_local(endpoint, refused):
    found = places.endpoint_refusal(endpoint, ("*",))
    assert (found is None) if refused is None else (refused in found), found


def test_an_admin_names_an_endpoint_host_or_limits_them():
    assert places.endpoint_refusal("http://127.0.0.1:8333", ("127.0.0.1",)) is None  # e.g. a test bed's own store
    assert places.endpoint_refusal("http://2130706433:8333", ("127.0.0.1",)) is None  # compared canonical
    assert places.endpoint_refusal("http://127.0.0.1:8333", ("127.*",)) is not None  # a glob is not a name
    only = ("*.storage.svc", "s3.amazonaws.com")
    assert places.endpoint_refusal("http://seaweedfs.storage.svc:8333", only) is None
    assert "endpoints.allow" in places.endpoint_refusal("http://evil.example", only)


@pytest.mark.parametrize("location, templates, refused", [
    ("s3a://ckpt/team-a/clicks", (), None),
    ("s3a://ckpt/streamapps/team-a/clicks/", (), None),
    ("s3a://ckpt/team-b/clicks", (), "is not the app's own"),
    ("s3a://ckpt/team-a/clicks/sub", (), "is not the app's own"),
    ("s3a://ckpt/team-a", (), "is not the app's own"),
    ("s3a://ckpt", (), "is not the app's own"),
    ("s3a://ckpt/team-b/x/../../team-a/clicks", (), "'..' path segment"),
    ("s3a://ckpt/team-b//team-a/clicks", (), "empty"),
    ("s3a://ckpt/team-b/./team-a/clicks", (), "'.'"),
    ("s3a://ckpt/team-b/%2e%2e/team-a/clicks", (), "%-encoding"),
    ("s3a://ckpt/team-b\\..\\team-a/clicks", (), "backslash"),
    ("s3a://ckpt/team-b?/team-a/clicks", (), "'?'"),
    ("s3a://ckpt/team-a/cl\u0456cks", (), "other characters"),
    ("s3a://ckpt/team-a/clicks", ("s3a://ckpt/{namespace}/{name}",), None),
    ("s3a://team-a-ckpt/apps/team-a/clicks", ("s3a://{namespace}-ckpt/",), None),
    ("s3a://other/team-a/clicks", ("s3a://ckpt/{namespace}/{name}",), "checkpoints.locations"),
    ("s3a://ckpt/team-a/clicksx/team-a/clicks", ("s3a://ckpt/{namespace}/{name}",), "checkpoints.locations"),
])
def test_checkpoint_locations_are_the_apps_own(location, templates, refused):
    found = places.location_refusal(location, "team-a", "clicks", templates)
    assert (found is None) if refused is None else (refused in found), found


def _with_checkpoint(checkpoint: dict, namespace: str | None = "team-a") -> dict:
    document = app_with(state={"checkpoint": checkpoint})
    document["metadata"].update({"name": "clicks", **({"namespace": namespace} if namespace else {})})
    return document


def test_the_operators_default_checkpoint_is_the_admins_not_judged_as_an_authors():
    from streamapp_api.checkpoint import CheckpointDefault
    from streamapp_api.document import parse

    default = CheckpointDefault("s3a://ckpt/{name}", {"endpoint": "http://127.0.0.1:8333", "pathStyleAccess": True})
    app, _ = parse(_with_checkpoint({}), Policy(), default)
    assert app.spec.state.checkpoint.location == "s3a://ckpt/clicks"
    assert check_policy(app, Policy(), default) == []
    assert {i.path for i in check_policy(app, Policy())} == {"spec.state.checkpoint.location",
                                                             "spec.state.checkpoint.s3.endpoint"}
    # an author who writes the default's location with an endpoint of their own is judged
    authored = load(_with_checkpoint({"location": "s3a://ckpt/clicks", "s3": {"endpoint": "http://169.254.169.254"}}))
    assert "spec.state.checkpoint.s3.endpoint" in {i.path for i in check_policy(authored, Policy(), default)}


def test_an_app_without_namespace_is_in_default():
    assert validate(_with_checkpoint({"location": "s3a://ckpt/default/clicks"}, None), Policy()) == []
    assert [i.path for i in validate(_with_checkpoint({"location": "s3a://ckpt/team-a/clicks"}, None), Policy())] == [
        "spec.state.checkpoint.location"]


# --- images as the container runtime reads them -------------------------------------------------------------

@pytest.mark.parametrize("reference, canonical, qualified", [
    ("streamapp/runtime:1", "docker.io/streamapp/runtime:1", False),
    ("ubuntu", "docker.io/library/ubuntu", False),
    ("docker.io/ubuntu:24.04", "docker.io/library/ubuntu:24.04", True),
    ("index.docker.io/streamapp/runtime", "docker.io/streamapp/runtime", True),
    ("Registry.Example:5000/team/rt@sha256:" + "a" * 64, "registry.example:5000/team/rt@sha256:" + "a" * 64, True),
    ("localhost/rt:dev", "localhost/rt:dev", True),
    ("Team/rt", "team/rt", True),  # an upper-case first part is a registry host, as Docker reads it
])
def test_image_references_are_canonical(reference, canonical, qualified):
    ref = parse_image(reference)
    assert (str(ref), ref.qualified) == (canonical, qualified)


@pytest.mark.parametrize("reference", ["streamapp/Runtime", "streamapp/runtime:latest/../evil", "streamapp//runtime",
                                       "streamapp/runtime@sha256:abc", "-evil.example/rt", "rt:", "streamapp/rüntime"])
def test_what_is_not_an_image_reference(reference):
    with pytest.raises(ValueError):
        parse_image(reference)


@pytest.mark.parametrize("image, prefixes, allowed", [
    ("docker.io/streamapp/runtime:1", ("streamapp/runtime",), True),
    ("index.docker.io/streamapp/runtime:1", ("docker.io/streamapp/runtime",), True),
    ("REGISTRY.example/team/rt:2", ("registry.example/team/",), True),
    ("registry.example/team/rt:2", ("Registry.Example/",), True),
    ("evil.example/streamapp/runtime:1", ("streamapp/runtime",), False),
    ("docker.io/library/ubuntu", ("ubuntu",), True),
    ("streamapp/runtime:latest/../evil", ("streamapp/runtime",), False),
    ("streamapp/runtime:1", ("streamapp/runtime:",), True),
    ("streamapp/runtime:2", ("streamapp/runtime:1",), False),
])
def test_images_and_prefixes_compare_canonical(image, prefixes, allowed):
    assert image_allowed(image, prefixes) is allowed


def test_an_authors_image_is_fully_qualified():
    (issue,) = validate(app_with(image="streamapp/runtime:1"), Policy())
    assert issue.path == "spec.image" and "'docker.io/streamapp/runtime:1'" in issue.message
    assert validate(app_with(image="docker.io/streamapp/runtime:1"), Policy()) == []


# --- placement and pod annotations -------------------------------------------------------------------------

@pytest.mark.parametrize("driver, path", [
    ({"nodeSelector": {"karpenter.sh/capacity-type": "spot"}}, None),
    ({"tolerations": [{"key": "dedicated", "operator": "Equal", "value": "streaming", "effect": "NoSchedule"}]}, None),
    ({"annotations": {"sidecar.istio.io/inject": "false"}}, None),
    ({"nodeSelector": {"node-role.kubernetes.io/control-plane": ""}},
     "spec.driver.nodeSelector[node-role.kubernetes.io/control-plane]"),
    ({"nodeSelector": {"node-role.kubernetes.io/master": ""}}, "spec.driver.nodeSelector[node-role.kubernetes.io/master]"),
    ({"tolerations": [{"operator": "Exists"}]}, "spec.driver.tolerations[0].key"),
    ({"tolerations": [{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"}]},
     "spec.driver.tolerations[0].key"),
    ({"annotations": {"iam.amazonaws.com/role": "admin"}}, "spec.driver.annotations[iam.amazonaws.com/role]"),
    ({"annotations": {"IAM.amazonaws.com/role": "admin"}}, "spec.driver.annotations[IAM.amazonaws.com/role]"),
    ({"annotations": {"eks.amazonaws.com/role-arn": "arn"}}, "spec.driver.annotations[eks.amazonaws.com/role-arn]"),
    ({"annotations": {"iam.gke.io/gcp-service-account": "sa"}}, "spec.driver.annotations[iam.gke.io/gcp-service-account]"),
    ({"annotations": {"seccomp.security.alpha.kubernetes.io/pod": "unconfined"}},
     "spec.driver.annotations[seccomp.security.alpha.kubernetes.io/pod]"),
    ({"annotations": {"k8s.v1.cni.cncf.io/networks": "host-net"}}, "spec.driver.annotations[k8s.v1.cni.cncf.io/networks]"),
    ({"labels": {"aadpodidbinding": "admin"}}, "spec.driver.labels[aadpodidbinding]"),
])
def test_placement_and_annotations_by_default(driver, path):
    assert [i.path for i in validate(app_with(driver=driver), Policy())] == ([path] if path else [])


def test_an_admin_governs_placement():
    policy = Policy.from_mapping({"pods": {"nodeSelector": {"allow": ["pool"]}, "tolerations": {"everyTaint": True},
                                           "annotations": {"allow": ["sidecar.istio.io/*"], "refuse": []}}})
    assert validate(app_with(driver={"nodeSelector": {"pool": "a"}, "tolerations": [{"operator": "Exists"}],
                                     "annotations": {"sidecar.istio.io/inject": "false"}}), policy) == []
    refused = validate(app_with(executor={"nodeSelector": {"zone": "a"}, "annotations": {"other/x": "1"}}), policy)
    assert [(i.path, "allow" in i.message) for i in refused] == [
        ("spec.executor.nodeSelector[zone]", True), ("spec.executor.annotations[other/x]", True)]
    # what the admin lists in nodeSelector.allow does not lift the control plane's refusal
    assert policy.pods.node_selector.refuse == ("node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master")


def test_a_policy_names_a_wrong_key_in_its_new_sections():
    with pytest.raises(InvalidSpec, match=r"pods\.tolerations\.everytaint"):
        Policy.from_mapping({"pods": {"tolerations": {"everytaint": True}}})
