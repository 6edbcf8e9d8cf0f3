"""`streamapp snapshot` and `streamapp restore` as a user types them, on local folders (no Spark): what
they print, and their one-line refusals with exit code 2."""

from __future__ import annotations

import pytest

from streamapp_api.cli import main
from streamapp_runtime.checkpoint import copying

pytestmark = pytest.mark.unit
APP = """apiVersion: streamapp.io/v1alpha1
kind: StreamApp
metadata: {name: counts}
spec:
  kafka: {bootstrapServers: "kafka:9092"}
  sources: [{name: clicks, topic: clicks, schema: {user: string}}]
  sinks: [{from: clicks, kafka: {topic: clicks-out}}]
"""


def _write(root, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_snapshot_then_restore_prints_each_querys_batch_and_refuses_what_would_mix_state(tmp_path, capsys):
    manifest, checkpoint, snapshot, restored = (tmp_path / "app.yaml", tmp_path / "gen-0", tmp_path / "snap",
                                                tmp_path / "gen-1")
    manifest.write_text(APP)
    _write(checkpoint, {"q/metadata": "{}", "q/offsets/0": "o", "q/offsets/1": "o", "q/commits/0": "c",
                        "q/state/0/0/1.delta": "d"})

    assert main(["snapshot", str(manifest), "--checkpoint", str(checkpoint), "--to", str(snapshot)]) == 0
    assert capsys.readouterr().out == f"{snapshot}: 4 files\n  q: batch 0\n"
    assert main(["restore", str(manifest), "--from", str(snapshot), "--checkpoint", str(restored)]) == 0
    assert capsys.readouterr().out.startswith(f"{restored}: 4 files\n  q: batch 0\n")

    assert main(["restore", str(manifest), "--from", str(snapshot), "--checkpoint", str(restored)]) == 2
    assert capsys.readouterr().err == (f"streamapp restore: {restored}: the checkpoint is not empty; a snapshot is "
                                       "restored into an empty or new one (a new state generation, or delete this one first)\n")
    (snapshot / copying.SNAPSHOT_FILE).unlink()  # as a copy that did not finish leaves it
    assert main(["restore", str(manifest), "--from", str(snapshot), "--checkpoint", str(tmp_path / "gen-2")]) == 2
    assert f"streamapp restore: {snapshot}: no _snapshot.json: not a snapshot, or an incomplete one" in capsys.readouterr().err
    assert main(["snapshot", str(manifest), "--checkpoint", str(checkpoint), "--to", str(snapshot)]) == 2
    assert capsys.readouterr().err == f"streamapp snapshot: {snapshot}: a checkpoint is copied into an empty or new folder\n"
    assert main(["snapshot", str(manifest), "--checkpoint", str(tmp_path / "none"), "--to", str(tmp_path / "s")]) == 2
    assert "no checkpoint there" in capsys.readouterr().err
