"""Spark decides what Spark runs: the driver refuses an app whose plans call a refused function, naming
the field, before any query starts, whatever the admission check read in its text; and no app's SQL
text has ${...} substituted.

Each attack manifest marked ``# spark: refused`` is built with the model alone (no API checks, no
policy): what would reach a driver if admission were walked around. No Kafka needed (dry run, and
``start`` refuses before it reads a topic).
"""

from __future__ import annotations

import os

import pytest
import yaml

from streamapp_api import StreamApp, contract
from streamapp_runtime.run import plan_guard, runner
from streamapp_runtime.run.settings import Settings
from streamapp_testbed.manifests import header, manifests, names_field
from streamapp_testbed.paths import REPO_DIR

pytestmark = [pytest.mark.integration, pytest.mark.slow]
NO_BROKER = "127.0.0.1:9"  # nothing listens: the guard must refuse before Kafka is needed
SPARK_REFUSED = [p for p in manifests("attacks") if header(p).get("spark") == "refused"]


def unchecked(path) -> StreamApp:
    return StreamApp.model_validate(yaml.safe_load(path.read_text()))


def settings(tmp_path, **conf) -> Settings:
    return Settings(checkpoint_root=str(tmp_path / "checkpoint"), kafka_override=NO_BROKER, spark_conf=conf)


def example(name: str, edit=lambda text: text) -> StreamApp:
    return StreamApp.model_validate(yaml.safe_load(edit((REPO_DIR / "examples" / f"{name}.yaml").read_text())))


def test_there_are_spark_side_attacks():
    assert len(SPARK_REFUSED) >= 12


@pytest.mark.parametrize("path", SPARK_REFUSED, ids=lambda p: p.stem)
def test_the_driver_refuses_an_attack_naming_its_field_before_any_query_starts(spark, tmp_path, path):
    expect = header(path)["expect"]
    with pytest.raises(plan_guard.AppRefused) as refused:
        runner.dry_run(spark, unchecked(path), settings(tmp_path))
    assert any(names_field(r.where, expect) for r in refused.value.refusals), str(refused.value)
    assert "is refused on this cluster" in str(refused.value)
    assert spark.streams.active == []
    assert not (tmp_path / "checkpoint").exists(), "nothing written"


def test_start_refuses_before_it_waits_for_kafka_or_takes_the_checkpoint(spark, tmp_path):
    path = next(p for p in SPARK_REFUSED if p.stem.startswith("60-"))
    with pytest.raises(plan_guard.AppRefused) as refused:
        runner.start(spark, unchecked(path), settings(tmp_path), quiet=True)
    assert str(refused.value).startswith("spec.streams[0].steps[1].filter: function reflect() is refused on this "
                                         "cluster (Spark's parser reads a call the admission check did not see)")
    assert spark.streams.active == [] and not (tmp_path / "checkpoint").exists()


def test_a_call_whose_name_is_computed_is_refused_by_the_analysed_plan(spark, tmp_path):
    """IDENTIFIER('ref' || 'lect')(...): no parser sees the name; the analysed plan holds reflection."""
    app = example("click-sessions", lambda t: t.replace(
        "event IN ('click', 'page_view')",
        "event IN ('click', 'page_view') AND IDENTIFIER('ref' || 'lect')('java.lang.System', 'getenv', 'HOME') "
        "IS NOT NULL"))
    with pytest.raises(plan_guard.AppRefused) as refused:
        runner.dry_run(spark, app, settings(tmp_path))
    assert [(r.where.split(" ")[0], r.function) for r in refused.value.refusals] == [("query", "reflect")] * len(
        refused.value.refusals)
    assert "the query's analysed plan calls it" in str(refused.value)


def test_try_reflect_is_refused_by_its_class_too(spark, tmp_path):
    """try_reflect analyses into TryReflect (RuntimeReplaceable) over CallMethodViaReflection."""
    app = example("click-sessions", lambda t: t.replace(
        "event IN ('click', 'page_view')",
        "event IN ('click', 'page_view') AND IDENTIFIER('try_' || 'reflect')('java.lang.System', 'getenv', 'HOME') "
        "IS NOT NULL"))
    with pytest.raises(plan_guard.AppRefused) as refused:
        runner.dry_run(spark, app, settings(tmp_path, **{contract.REFUSED_FUNCTIONS_CONF: "try_reflect"}))
    assert {r.function for r in refused.value.refusals} == {"try_reflect"}


def test_the_operator_setting_decides_what_is_refused(spark, tmp_path):
    app = example("click-sessions")
    assert runner.dry_run(spark, app, settings(tmp_path))  # the default list: nothing in the example
    with pytest.raises(plan_guard.AppRefused) as refused:  # an admin who refuses count_if
        runner.dry_run(spark, app, settings(tmp_path, **{contract.REFUSED_FUNCTIONS_CONF: "count_if,reflect"}))
    assert {(r.where, r.function) for r in refused.value.refusals} == {
        ("spec.streams[0].steps[2].aggregate.columns.clicks", "count_if"),
        ("spec.streams[0].steps[2].aggregate.columns.page_views", "count_if")}
    attack = next(p for p in SPARK_REFUSED if p.stem.startswith("68-"))
    assert runner.dry_run(spark, unchecked(attack), settings(tmp_path, **{contract.REFUSED_FUNCTIONS_CONF: ""}))


def test_variables_are_not_substituted_in_what_the_runtime_runs(spark, tmp_path, capsys):
    """${env:HOME} and ${spark.app.name} stay text in an app's filter and select, even in a session that
    substituted them before (a laptop's, another app's)."""
    spark.conf.set(contract.SQL_VARIABLE_SUBSTITUTE, "true")
    home = os.environ["HOME"]
    assert spark.range(1).selectExpr("'${env:HOME}' AS h").first()["h"] == home, "substitution on: replaced"
    app = example("click-sessions", lambda t: t.replace(
        "- filter: \"event IN ('click', 'page_view')\"",
        "- filter: \"event IN ('click', 'page_view') AND uuid <> '${env:HOME}'\"\n"
        "    - select: [\"*\", \"'${spark.app.name}' AS app_name\"]"))
    assert app.spec.streams[0].steps[1].select == ["*", "'${spark.app.name}' AS app_name"]
    compiled = runner.compile_app(spark, app, settings(tmp_path))
    capsys.readouterr()
    for _, df in compiled:
        df.explain(extended=True)
    plans = capsys.readouterr().out
    assert "${env:HOME}" in plans and "${spark.app.name}" in plans
    assert f"'{home}'" not in plans and "'streamapp-" not in plans
    assert spark.range(1).selectExpr("'${env:HOME}' AS h").first()["h"] == "${env:HOME}"
