"""`streamapp validate` end to end through main(): exit codes, output format, multi-document files."""

import json
from pathlib import Path

import pytest

from streamapp_api import cli
from streamapp_api.validate_cli import locate, path_parts

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[3]
GOOD = ROOT / "examples" / "word-count.yaml"
BAD = ROOT / "tests" / "manifests" / "invalid" / "hopping-advance-longer-than-size.yaml"

SECRET = """apiVersion: v1
kind: Secret
metadata: {name: pg}
stringData: {uri: "postgresql://app:secret@postgres:5432/app"}
"""


def run(capsys, *argv):
    code = cli.main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_valid_file_exits_zero(capsys):
    code, out, _ = run(capsys, "validate", str(GOOD))
    assert code == 0
    assert "StreamApp word-count: valid" in out


def test_invalid_file_names_file_line_and_field(capsys):
    code, out, _ = run(capsys, "validate", str(BAD))
    assert code == 1
    line = next(l for l in out.splitlines() if "error:" in l)
    location, _, rest = line.partition(": error: ")
    assert location == f"{BAD}:{_line_of(BAD, 'advance: 5m')}"
    assert rest.startswith("spec.streams[0].steps[1].window.advance: advance 5m is longer than size 1m")
    assert "must not be longer than size" in rest


def _line_of(path: Path, text: str) -> int:
    return next(i for i, l in enumerate(path.read_text().splitlines(), 1) if text in l)


def test_several_files_fail_if_one_fails(capsys):
    code, out, _ = run(capsys, "validate", str(GOOD), str(BAD))
    assert code == 1
    assert "word-count: valid" in out and "invalid" in out


def test_multi_document_file_skips_other_kinds(tmp_path, capsys):
    path = tmp_path / "app.yaml"
    path.write_text(SECRET + "---\n" + GOOD.read_text() + "---\n" + BAD.read_text())
    code, out, _ = run(capsys, "validate", str(path))
    assert code == 1
    assert "skipped Secret (v1)" in out
    assert "word-count: valid" in out
    assert "bad-hopping-advance-longer-than-size: invalid" in out


def test_file_without_streamapp_is_an_error(tmp_path, capsys):
    path = tmp_path / "secret.yaml"
    path.write_text(SECRET)
    code, out, _ = run(capsys, "validate", str(path))
    assert code == 1 and "no StreamApp manifest found" in out


def test_yaml_syntax_error_points_at_the_line(tmp_path, capsys):
    path = tmp_path / "broken.yaml"
    path.write_text("apiVersion: streamapp.io/v1alpha1\nkind: StreamApp\nspec: [unclosed\n")
    code, out, _ = run(capsys, "validate", str(path))
    assert code == 1
    assert f"{path}:" in out and "not valid YAML" in out


@pytest.mark.parametrize("text, line, words", [
    ("spec:\n  kafka:\n    bootstrapServers: k:9092\n   sources: []\n", 4,
     "indented differently from the block that starts on line 2"),
    ("spec:\n  kafka: bootstrapServers: k:9092\n", 2, "a value holding ': ' needs quotes"),
    ("spec:\n\tkafka: {}\n", 2, "a tab (column 1): YAML indents with spaces only"),
])
def test_yaml_mistakes_are_told_as_the_mistake_not_the_parser_state(tmp_path, capsys, text, line, words):
    path = tmp_path / "broken.yaml"
    path.write_text(text)
    code, out, _ = run(capsys, "validate", str(path))
    assert code == 1 and f"{path}:{line}: error: (yaml): not valid YAML: " in out and words in out, out
    assert "<block" not in out


def test_missing_file_is_a_usage_error(tmp_path, capsys):
    code, _, err = run(capsys, "validate", str(tmp_path / "nope.yaml"))
    assert code == 2 and "cannot read" in err


def test_json_output(capsys):
    code, out, _ = run(capsys, "validate", "-o", "json", str(BAD))
    assert code == 1
    (report,) = json.loads(out)
    paths = [i["path"] for i in report["issues"]]
    assert "spec.streams[0].steps[1].window.advance" in paths


def test_strict_turns_warnings_into_failure(tmp_path, capsys):
    text = GOOD.read_text().replace("  sinks:\n", "  tables:\n  - {name: unused, topic: t, format: string}\n  sinks:\n")
    path = tmp_path / "warn.yaml"
    path.write_text(text)
    assert run(capsys, "validate", str(path))[0] == 0
    code, out, _ = run(capsys, "validate", "--strict", str(path))
    assert code == 1 and "warning: spec.tables[0].name" in out


def test_unknown_command_and_no_command(capsys):
    assert run(capsys, "explode")[0] == 2
    assert run(capsys)[0] == 2


def test_unavailable_command_module_is_reported(capsys, monkeypatch):
    monkeypatch.setitem(cli.COMMANDS, "run", cli.Command("streamapp_runtime_not_installed.cli", "run a pipeline"))
    code, _, err = run(capsys, "run", "x")
    assert code == 2 and "not available" in err


def test_crd_command_prints_the_crd(capsys):
    code, out, _ = run(capsys, "crd")
    assert code == 0 and out == (ROOT / "crds" / "streamapp.io_streamapps.yaml").read_text()


@pytest.mark.parametrize("path, parts", [
    ("spec.streams[0].steps[2].window.advance", ["spec", "streams", 0, "steps", 2, "window", "advance"]),
    ("spec.kafka.options[group.id]", ["spec", "kafka", "options", "group.id"]),
    ("spec.sources[0].schema[user-id]", ["spec", "sources", 0, "schema", "user-id"]),
])
def test_path_parts(path, parts):
    assert path_parts(path) == parts


def test_locate_falls_back_to_the_deepest_existing_node():
    import yaml
    node = yaml.compose("a:\n  b:\n  - x: 1\n  - y: 2\n")
    assert locate(node, "a.b[1].y") == 4
    assert locate(node, "a.b[1].missing") == 4
    assert locate(node, "a.c") == 1


def test_policy_file_decides_what_passes(tmp_path, capsys):
    attack = str(ROOT / "tests" / "manifests" / "attacks" / "03-spark-jars-from-url.yaml")
    code, out, _ = run(capsys, "validate", attack)
    assert code == 1 and "spec.sparkConf[spark.jars]" in out and "loads code" in out
    policy = tmp_path / "policy.yaml"
    policy.write_text("sparkConf:\n  allow: [spark.jars]\n")
    code, out, _ = run(capsys, "validate", "--policy", str(policy), attack)
    assert code == 0, out
    policy.write_text("sparkConf:\n  alow: [spark.jars]\n")
    code, _, err = run(capsys, "validate", "--policy", str(policy), attack)
    assert code == 2 and "sparkConf.alow" in err and "did you mean 'allow'" in err


@pytest.mark.parametrize("argv", [["--version"], *[[name, "--version"] for name in cli.COMMANDS]])
def test_every_command_prints_the_one_version(argv, capsys):
    """`streamapp --version` and each subcommand's: "<prog> <version>", exit 0, from streamapp_api.version."""
    from streamapp_api.version import __version__

    with pytest.raises(SystemExit) as exit_:
        cli.main(argv)
    assert exit_.value.code == 0
    prog = " ".join(["streamapp", *argv[:-1]])
    assert capsys.readouterr().out.strip() == f"{prog} {__version__}"


def test_operator_and_demo_print_the_same_version(capsys):
    from streamapp_api.version import __version__
    from streamapp_demo.__main__ import main as demo_main
    from streamapp_operator.__main__ import main as operator_main

    for main, prog in ((operator_main, "python -m streamapp_operator"), (demo_main, "python -m streamapp_demo")):
        with pytest.raises(SystemExit) as exit_:
            main(["--version"])
        assert exit_.value.code == 0
        assert capsys.readouterr().out.strip() == f"{prog} {__version__}"


def test_the_version_has_one_owner():
    """pyproject reads it from streamapp_api.version, the chart's appVersion and the default runtime image match it."""
    import tomllib

    import yaml

    from streamapp_api.version import __version__
    from streamapp_operator import names

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "streamapp_api.version.__version__"}
    chart = yaml.safe_load((ROOT / "charts" / "streamapp-operator" / "Chart.yaml").read_text())
    assert chart["appVersion"] == __version__
    assert names.DEFAULT_RUNTIME_IMAGE.endswith(f":{__version__}")


def test_demo_help_starts_nothing(capsys):
    """`python -m streamapp_demo --help` prints its usage and exits: no Kafka, no cluster (both demos)."""
    from streamapp_demo.__main__ import main as demo_main

    with pytest.raises(SystemExit) as exit_:
        demo_main(["--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "--local" in out and "SIGTERM" in out


def test_test_bed_commands_print_the_versions_of_their_parts(capsys):
    """The test bed knows none of the product (import contracts): its --version names what it runs."""
    from streamapp_testbed.__main__ import main as bed_main
    from streamapp_testbed.paths import versions

    with pytest.raises(SystemExit) as exit_:
        bed_main(["--version"])
    assert exit_.value.code == 0
    out = " ".join(capsys.readouterr().out.split())  # argparse wraps long version lines
    assert f"kafka {versions()['KAFKA_VERSION']}" in out and f"spark {versions()['SPARK_VERSION']}" in out
