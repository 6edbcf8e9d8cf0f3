"""docs/runtime-contract.md, checked from both sides: what the operator puts in the driver pod's
environment is what the runtime reads."""

from __future__ import annotations

import pytest
import yaml

from streamapp_api.document import load
from streamapp_operator.render.driver import _postgres_env
from streamapp_runtime.settings import Settings, postgres_env_uris, postgres_uri
from streamapp_testbed.paths import REPO_DIR

pytestmark = pytest.mark.unit


def test_each_postgres_sink_uri_reaches_the_runtime_under_the_name_it_reads():
    app = load(yaml.safe_load((REPO_DIR / "examples" / "click-sessions.yaml").read_text()))
    env = _postgres_env(app)
    # What the kubelet would resolve from the Secret: here each variable gets a distinct value.
    environ = {var["name"]: f"postgresql://from-{var['valueFrom']['secretKeyRef']['name']}" for var in env}
    settings = Settings(checkpoint_root="/tmp/x", postgres_uris=postgres_env_uris(environ))

    for sink in (s for s in app.spec.sinks if s.postgres):
        secret = sink.postgres.secret_ref
        assert {"name": secret.name, "key": secret.key} in [v["valueFrom"]["secretKeyRef"] for v in env]
        assert postgres_uri(settings, secret.name, "spec.sinks") == f"postgresql://from-{secret.name}"
