"""A local SparkSession wired to the Kafka connector jars that Maven resolved: nothing is
downloaded when a query starts."""

from __future__ import annotations

from pathlib import Path

from .paths import installed


def local_session(workdir: Path, app_name: str = "streamapp-testbed", cores: int = 2):
    import os
    import sys

    from pyspark.sql import SparkSession

    from streamapp_runtime.session import bind_to_loopback

    # Python workers must be this interpreter (the venv with pandas, pyarrow, psycopg), not
    # whatever `python3` is first on PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    bind_to_loopback()
    workdir.mkdir(parents=True, exist_ok=True)
    return (
        SparkSession.builder.master(f"local[{cores}]")
        .appName(app_name)
        .config("spark.jars", installed().spark_jars_conf())
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.local.dir", str(workdir / "local"))
        .config("spark.sql.warehouse.dir", str(workdir / "warehouse"))
        .config("spark.driver.memory", "1g")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.extraJavaOptions", f"-Dderby.system.home={workdir}")
        .getOrCreate()
    )


def stop_session(session) -> None:
    """Stop Spark and its JVM now, rather than whenever the Python process exits (the runtime's
    own shutdown, so tests stop Spark exactly as `streamapp run` does)."""
    from streamapp_runtime.session import stop_session as stop

    stop(session)
