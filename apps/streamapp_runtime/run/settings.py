"""Runtime settings from the command line, the environment and spark.properties. Pure: no pyspark.

Precedence follows docs/runtime-contract.md: the operator's spark.properties is applied verbatim,
then the runtime's own defaults fill the keys it did not give.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from streamapp_api import contract
from streamapp_api.checkpoint import checkpoint_root as generation_root
from streamapp_api.contract import kafka_env_options

from streamapp_runtime.connections import postgres_env_name


class SettingsError(ValueError):
    """A setting that cannot be used; the message names it."""


@dataclass(frozen=True)
class Settings:
    checkpoint_root: str
    kafka_override: str | None = None
    available_now: bool = False
    console: bool = False
    metrics_port: int | None = contract.METRICS_PORT
    spark_conf: dict[str, str] = field(default_factory=dict)
    postgres_uris: dict[str, str] = field(default_factory=dict)  # secret name -> URI
    kafka_env_options: dict[str, str] = field(default_factory=dict)
    schema_registry_user_info: str | None = None  # from spec.kafka.schemaRegistry.secretRef
    base: str | None = None  # where the app's state generations and snapshots live; None: the root's parent

    @property
    def app_base(self) -> str:
        """The app's base: snapshots are under it (``streamapp_api.checkpoint.snapshot_location``)."""
        return self.base or parent(self.checkpoint_root)


_ENV_REF = re.compile(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}")
# The keys the operator writes with a reference to the driver's environment (render/config.py). An
# author's value holding '${' would read the driver's environment (admission refuses it; so does this).
ENV_EXPANDED_KEYS = frozenset({"spark.master"})


def expand_env(conf: dict[str, str], environ: dict[str, str], origin: str = "spark.properties") -> dict[str, str]:
    """``${env:NAME}`` in the operator's own values (ENV_EXPANDED_KEYS) -> the variable's value (Spark's
    own reference syntax, which Spark expands only for some keys). A reference to a variable that is not
    set, and any '${' in another key's value, is an error naming the key."""
    def value(key: str, text: str) -> str:
        if "${" not in text:
            return text
        if key not in ENV_EXPANDED_KEYS:
            raise SettingsError(f"{origin}: {key} holds '${{', a reference to the driver's environment or system "
                                f"properties; only {', '.join(sorted(ENV_EXPANDED_KEYS))} may refer to them")

        def sub(match: re.Match) -> str:
            if match.group(1) not in environ:
                raise SettingsError(f"{origin}: {key} refers to ${{env:{match.group(1)}}}, which is not set")
            return environ[match.group(1)]
        return _ENV_REF.sub(sub, text)

    return {key: value(key, text) for key, text in conf.items()}


def postgres_env_uris(environ: dict[str, str]) -> dict[str, str]:
    """``STREAMAPP_POSTGRES_<SECRET>=uri`` (secret name upper-cased, '-' and '.' as '_') -> {secret: uri}.

    The key is normalised, so lookups go through ``connections.postgres_uri``.
    """
    prefix = contract.ENV_POSTGRES_PREFIX
    return {k[len(prefix):]: v for k, v in environ.items() if k.startswith(prefix) and len(k) > len(prefix)}


def metrics_port(environ: dict[str, str]) -> int:
    text = environ.get(contract.ENV_METRICS_PORT, str(contract.METRICS_PORT))
    if not text.isdigit() or not 0 <= int(text) < 65536:
        raise SettingsError(f"{contract.ENV_METRICS_PORT}={text!r}: expected a port number (0-65535)")
    return int(text)


def checkpoint_root(flag: str | None, environ: dict[str, str], app_name: str, location: str | None = None,
                    reset_nonce: str | None = None) -> str:
    """--checkpoint, else the driver pod's variable, else the app's object-store location (its current
    state generation, as the operator sets it), else a folder here."""
    if flag:
        return flag
    if environ.get(contract.ENV_CHECKPOINT_DIR):
        return environ[contract.ENV_CHECKPOINT_DIR]
    if location:
        return generation_root(location, reset_nonce)
    return os.path.join(os.getcwd(), ".streamapp", "checkpoints", app_name)


def parent(location: str) -> str:
    """The folder holding ``location``, a path or a URI. Pure."""
    if "://" in location:
        head, _, _ = location.rstrip("/").rpartition("/")
        return head
    return os.path.dirname(os.path.abspath(location.removeprefix("file:")))


def app_base(flag: str | None, environ: dict[str, str], app_name: str, location: str | None = None) -> str:
    """Where the app's state generations and snapshots live: the parent of the checkpoint root
    ``checkpoint_root`` gives (a driver pod's volume mount or object-store location, a --checkpoint
    folder's parent), except for the default root of a local run, whose parent all local apps share:
    then a folder of the app's own."""
    root = checkpoint_root(flag, environ, app_name, location)
    if flag or environ.get(contract.ENV_CHECKPOINT_DIR) or location:
        return parent(root)
    return os.path.join(os.getcwd(), ".streamapp", "apps", app_name)


def spark_defaults(app_name: str, store: str, environ: dict[str, str],
                   checkpoint_conf: dict[str, str] | None = None) -> dict[str, str]:
    """The runtime's Spark settings, applied under whatever spark.properties gave; ``checkpoint_conf``:
    the app's object-store settings (Checkpoint.spark_conf), as the operator writes them for a pod."""
    conf = {
        **(checkpoint_conf or {}),
        "spark.master": "local[2]",
        "spark.app.name": f"streamapp-{app_name}",
        **contract.app_sql_conf(store),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.streaming.noDataProgressEventInterval": "10000",
        "spark.sql.adaptive.enabled": "false",  # AQE is off for streaming anyway; keep batch plans fixed
    }
    if environ.get(contract.ENV_POD_IP):
        conf["spark.driver.host"] = environ[contract.ENV_POD_IP]
        conf["spark.driver.bindAddress"] = "0.0.0.0"
    return conf


def merge_conf(given: dict[str, str], defaults: dict[str, str]) -> dict[str, str]:
    merged = dict(defaults)
    merged.update(given)
    return merged


def choose_shuffle_partitions(recorded: int | None, spec_value: int | None, conf_value: str | None,
                              partition_counts: dict[str, int], grow_into: int | None = None) -> tuple[int, str]:
    """Shuffle partitions for this checkpoint, and why.

    Once recorded they never change (state is partitioned by them); on a first run the spec wins,
    then spark.properties, then the largest input topic's partition count, raised to ``grow_into``
    (scaling.mode load: maxExecutors × executor cores, so the app can grow with every core busy).
    """
    if recorded is not None:
        return recorded, "recorded in the checkpoint at its first run"
    if spec_value is not None:
        return spec_value, "spec.shufflePartitions"
    if conf_value is not None:
        if not conf_value.isdigit() or int(conf_value) < 1:
            raise SettingsError(f"spark.sql.shuffle.partitions={conf_value!r}: expected a positive integer")
        return int(conf_value), "spark.sql.shuffle.partitions"
    chosen, why = 1, "no input topic found"
    if partition_counts:
        topic = max(partition_counts, key=lambda t: (partition_counts[t], t))
        chosen, why = max(1, partition_counts[topic]), f"partition count of topic {topic!r}"
    if grow_into is not None and grow_into > chosen:
        return grow_into, "scaling.mode load: room to grow to maxExecutors × executor cores"
    return chosen, why


def choose_state_function(recorded: dict, conf_value: str | None, store: str) -> tuple[str, str]:
    """The Python state API of this checkpoint's accumulate and table-join state, and why. Pure.

    The state is readable only by the API that wrote it, so once recorded the choice never changes.
    A checkpoint recorded without one was written before the runtime chose: applyInPandasWithState,
    the only API there was. A new one takes transformWithState (row-based, so faster for the
    accumulate step: docs/runtime.md, "Per-key state"), unless spark.streamapp.stateFunction says
    otherwise; transformWithState needs the RocksDB state store."""
    row_based, pandas = contract.STATE_FUNCTIONS
    if recorded.get("stateFunction") is not None:
        return recorded["stateFunction"], "recorded in the checkpoint at its first run"
    if recorded:
        return pandas, "the checkpoint was written before the runtime recorded its state function"
    if conf_value is not None and conf_value not in contract.STATE_FUNCTIONS:
        raise SettingsError(f"{contract.STATE_FUNCTION_CONF}={conf_value!r}: expected one of "
                            f"{', '.join(contract.STATE_FUNCTIONS)}")
    if store != "rocksdb":
        if conf_value == row_based:
            raise SettingsError(f"{contract.STATE_FUNCTION_CONF}={row_based}: it needs spec.state.store rocksdb, "
                                f"not {store}")
        return pandas, f"spec.state.store {store}: transformWithState needs rocksdb"
    if conf_value is not None:
        return conf_value, contract.STATE_FUNCTION_CONF
    return row_based, "a new checkpoint"


def from_environment(*, checkpoint: str | None, app_name: str, kafka: str | None, available_now: bool,
                     console: bool, spark_conf: dict[str, str], postgres: dict[str, str],
                     environ: dict[str, str] | None = None, port: int | None = None,
                     location: str | None = None, reset_nonce: str | None = None) -> Settings:
    env = dict(os.environ if environ is None else environ)
    uris = postgres_env_uris(env)
    uris.update({postgres_env_name(k) if k != "*" else "*": v for k, v in postgres.items()})
    return Settings(
        checkpoint_root=checkpoint_root(checkpoint, env, app_name, location, reset_nonce),
        base=app_base(checkpoint, env, app_name, location),
        kafka_override=kafka,
        available_now=available_now,
        console=console,
        metrics_port=metrics_port(env) if port is None else port,
        spark_conf=spark_conf,
        postgres_uris=uris,
        kafka_env_options=kafka_env_options(env),
        schema_registry_user_info=env.get(contract.ENV_SCHEMA_REGISTRY_USER_INFO),
    )
