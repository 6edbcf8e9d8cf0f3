"""One set of Kafka credentials, two kinds of client (docs/kafka.md). Pure, standard library only.

An app's Kafka client options are spec.kafka.options plus the keys of the Secret spec.kafka.secretRef
names. Spark's Kafka source and sink use the Java client; the runtime's own clients (topic waits,
partition counts, dead letters, exactly-once writes, consumer-group commits) and the operator's
(partition counts) use librdkafka. The two name the same things differently: the Java client wants a
``sasl.jaas.config`` line and ``ssl.truststore.*`` / ``ssl.keystore.*``, librdkafka ``sasl.username``,
``sasl.password`` and ``ssl.*.pem``. The user writes either (or the neutral set: librdkafka's names
plus ``sasl.mechanism``); ``java_options`` and ``librdkafka_options`` derive what each client needs.

What is read (keys as the clients read them, ``option_key``):

=================================  =========================================================
``security.protocol``              PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL; without it,
                                   SASL_SSL when a username is given, SSL when a CA or a
                                   client certificate is
``sasl.mechanism``                 PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER
                                   (librdkafka's ``sasl.mechanisms`` is read too)
``sasl.username``/``sasl.password``  PLAIN and SCRAM; or a Java ``sasl.jaas.config`` naming
                                   Kafka's PLAIN or SCRAM login module, whose username and
                                   password are read out of it
``ssl.ca.pem``                     the CA certificates (PEM) that signed the brokers'; or
                                   ``ssl.truststore.certificates``
``ssl.certificate.pem``            the client's certificate chain (PEM), for mTLS; or
                                   ``ssl.keystore.certificate.chain``
``ssl.key.pem``                    its private key (PEM, PKCS#8 for the Java client); or
                                   ``ssl.keystore.key``; ``ssl.key.password`` if encrypted
=================================  =========================================================
"""

from __future__ import annotations

import re
from collections.abc import Mapping

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTHBEARER_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
# The login module a mechanism takes (the Java client); those whose username and password we read.
LOGIN_MODULES = {"PLAIN": PLAIN_MODULE, "SCRAM-SHA-256": SCRAM_MODULE, "SCRAM-SHA-512": SCRAM_MODULE}
PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
# A JAAS line's login modules: `<class> required|requisite|sufficient|optional`. The policy's check of
# the modules (policy/kafka.py) and the reading of username and password below both use it.
LOGIN_MODULE = re.compile(r"(?:^|;)\s*([^\s;]+)\s+(?:required|requisite|sufficient|optional)\b", re.IGNORECASE)
_JAAS_OPTION = re.compile(r'([A-Za-z_][\w.-]*)\s*=\s*"((?:[^"\\]|\\.)*)"', re.DOTALL)
# librdkafka's words (in its log) for a broker that refused the client's credentials: SASL's, or TLS's
# over a certificate (the client's refused, none given where one is required, the broker's not trusted).
_REFUSED = re.compile(r"SASL authentication error|Authentication failed|SSL handshake failed|certificate",
                      re.IGNORECASE)

# The librdkafka options our own clients take from an app's options: how to reach and authenticate to
# the cluster. A safe list, not a prefix: under ssl.* and sasl.* librdkafka also loads code
# (ssl.engine.location), runs commands (sasl.kerberos.kinit.cmd), reads files of the operator's pod
# (ssl.*.location) and fetches URLs (sasl.oauthbearer.token.endpoint.url).
LIBRDKAFKA_OPTIONS = frozenset({
    "security.protocol", "sasl.mechanisms", "sasl.username", "sasl.password",
    "ssl.ca.pem", "ssl.certificate.pem", "ssl.key.pem", "ssl.key.password", "ssl.endpoint.identification.algorithm",
    "ssl.cipher.suites", "ssl.curves.list", "ssl.sigalgs.list", "enable.ssl.certificate.verification",
})
# librdkafka's names of what the Java client is told its own way (a JAAS line, PEM keystores). The
# Java options keep librdkafka's other settings (the runtime derives its own clients' from them).
_LIBRDKAFKA_NAMES = frozenset({
    "sasl.mechanisms", "sasl.username", "sasl.password", "ssl.ca.pem", "ssl.certificate.pem", "ssl.key.pem",
})


class CredentialsError(ValueError):
    """The options name credentials that cannot be put together; the message says what to fix."""


def option_key(key: str) -> str:
    """A Secret's key (or an environment variable's name after the prefix) as the clients read it:
    lower-case, ``_`` as ``.``: ``SASL_PASSWORD`` and ``sasl.password`` are the same option."""
    return key.strip().lower().replace("_", ".")


def secret_options(data: Mapping[str, str]) -> dict[str, str]:
    """A Secret's keys (decoded values) as client options."""
    return {option_key(key): value for key, value in data.items()}


def refused_credentials(log_line: str) -> str | None:
    """A librdkafka log line that says the broker refused the client's credentials, without its
    thread prefix; None for any other line. Our clients (the operator's, the runtime's topic wait) tell
    a refusal from a broker out of reach by it: librdkafka's request errors say only "transport failure"."""
    if not _REFUSED.search(log_line):
        return None
    return re.sub(r"^(?:FAIL: )?\[thrd:[^\]]*\]:\s*", "", log_line)


def _jaas_quote(value: str, what: str) -> str:
    if any(ord(c) < 32 for c in value):
        raise CredentialsError(f"{what} holds a line break or another control character (a Secret made from a "
                               "file with a final newline?); write the value alone")
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def jaas_credentials(jaas: str) -> tuple[str, str] | None:
    """(username, password) of a JAAS line that names only Kafka's PLAIN or SCRAM login module."""
    modules = LOGIN_MODULE.findall(jaas)
    if not modules or any(m not in (PLAIN_MODULE, SCRAM_MODULE) for m in modules):
        return None
    found = {k.lower(): re.sub(r"\\(.)", r"\1", v, flags=re.DOTALL) for k, v in _JAAS_OPTION.findall(jaas)}
    if "username" not in found or "password" not in found:
        return None
    return found["username"], found["password"]


def _settings(options: Mapping[str, str]) -> dict[str, str | None]:
    """What both clients are to be told, from either flavour of input."""
    get = options.get
    mechanism = get("sasl.mechanism") or get("sasl.mechanisms")
    username, password = get("sasl.username"), get("sasl.password")
    jaas = get("sasl.jaas.config")
    if jaas and not (username and password):
        username, password = jaas_credentials(jaas) or (username, password)
    ca = get("ssl.ca.pem") or get("ssl.truststore.certificates")
    certificate = get("ssl.certificate.pem") or get("ssl.keystore.certificate.chain")
    key = get("ssl.key.pem") or get("ssl.keystore.key")
    protocol = get("security.protocol")
    if protocol is None and (username or jaas):
        protocol = "SASL_SSL"
    elif protocol is None and (ca or certificate):
        protocol = "SSL"
    if protocol is not None and protocol.upper() not in PROTOCOLS:
        raise CredentialsError(f"security.protocol {protocol!r} is not one of {', '.join(PROTOCOLS)}")
    if protocol and protocol.upper().startswith("SASL") and not mechanism:
        raise CredentialsError(f"security.protocol {protocol} needs sasl.mechanism: one of {', '.join(MECHANISMS)}")
    if mechanism in LOGIN_MODULES and not jaas and not (username and password):
        raise CredentialsError(f"sasl.mechanism {mechanism} needs sasl.username and sasl.password")
    if bool(certificate) != bool(key):
        raise CredentialsError("a client certificate needs both ssl.certificate.pem and ssl.key.pem")
    return {"protocol": protocol, "mechanism": mechanism, "username": username, "password": password,
            "jaas": jaas, "ca": ca, "certificate": certificate, "key": key}


def java_options(options: Mapping[str, str]) -> dict[str, str]:
    """The Java client's options (Spark's Kafka source and sink, un-prefixed) from an app's options:
    the JAAS line built from a username and password, PEM material inline (KIP-651), librdkafka's names
    of these left out. ``librdkafka_options`` of the result is that of ``options``."""
    s = _settings(options)
    out = {k: v for k, v in options.items() if k not in _LIBRDKAFKA_NAMES}
    if s["protocol"]:
        out["security.protocol"] = s["protocol"]
    if s["mechanism"]:
        out["sasl.mechanism"] = s["mechanism"]
    module = LOGIN_MODULES.get(s["mechanism"] or "")
    if not s["jaas"] and module and s["username"] and s["password"]:
        out["sasl.jaas.config"] = (f"{module} required username={_jaas_quote(s['username'], 'sasl.username')} "
                                   f"password={_jaas_quote(s['password'], 'sasl.password')};")
    if s["ca"] and "ssl.truststore.location" not in options:
        out.update({"ssl.truststore.type": "PEM", "ssl.truststore.certificates": s["ca"]})
    if s["certificate"] and s["key"] and "ssl.keystore.location" not in options:
        out.update({"ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": s["certificate"],
                    "ssl.keystore.key": s["key"]})
    if options.get("ssl.endpoint.identification.algorithm", "").lower() == "none":
        out["ssl.endpoint.identification.algorithm"] = ""  # the Java client's way to say it
    return out


def librdkafka_options(options: Mapping[str, str]) -> dict[str, str]:
    """librdkafka's options (our own clients, without bootstrap.servers) from an app's options: those on
    LIBRDKAFKA_OPTIONS, with the username and password read out of a JAAS line and PEM material taken
    from the Java client's names when given that way."""
    s = _settings(options)
    out = {k: v for k, v in options.items() if k in LIBRDKAFKA_OPTIONS}
    derived = {"security.protocol": s["protocol"], "sasl.mechanisms": s["mechanism"], "sasl.username": s["username"],
               "sasl.password": s["password"], "ssl.ca.pem": s["ca"], "ssl.certificate.pem": s["certificate"],
               "ssl.key.pem": s["key"]}
    out.update({k: v for k, v in derived.items() if v})
    if out.get("ssl.endpoint.identification.algorithm") == "":
        out["ssl.endpoint.identification.algorithm"] = "none"  # librdkafka's way to say it
    return out
