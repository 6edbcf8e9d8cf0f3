"""``streamapp jars``: Spark's Kafka connector for a local ``streamapp run``, resolved once by Maven.

pyspark from PyPI ships no Kafka connector. This resolves the one matching the installed pyspark
(``connector-pom.xml`` beside this file: spark-sql-kafka and its few dependencies Spark does not
already ship) from Maven Central into ``$STREAMAPP_CACHE/jars/spark-kafka-<spark version>``
(default ``~/.cache/streamapp``), where ``streamapp run`` finds it. Nothing is downloaded when a
query starts. The same folder gets the runtime's own jar, compiled with the JDK's javac against the
installed pyspark's jars (``jvm/`` beside this file: the JSON fast path of
``compile.sources``); its name carries a hash of its sources, so a changed source builds it again.
The pom also brings Delta Lake for the Spark versions Delta is built for (the delta sink). The
folder's completion mark holds a hash of the pom, so a folder resolved with an older pom (one without
Delta, say) is resolved again.
The test bed (`make deps`) fills the same folder through this command; the runtime image has the
jars in Spark's own folder instead.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

POM = Path(__file__).resolve().parent / "connector-pom.xml"
COMPLETE = ".complete"
JVM_SOURCES = Path(__file__).resolve().parent / "jvm"
RUNTIME_JAR_PREFIX = "streamapp-runtime-"


def spark_version() -> str:
    return importlib.metadata.version("pyspark")


def cache_dir() -> Path:
    return Path(os.environ.get("STREAMAPP_CACHE") or Path.home() / ".cache" / "streamapp")


def default_dir(version: str | None = None) -> Path:
    return cache_dir() / "jars" / f"spark-kafka-{version or spark_version()}"


def minor_version(version: str) -> str:
    """The first two numbers of a Spark version: Delta's artifacts are named after them (the pom's profiles)."""
    return ".".join(version.split(".")[:2])


def pom_digest() -> str:
    """What a complete folder's mark holds: the pom it was resolved with, hashed."""
    return hashlib.sha256(POM.read_bytes()).hexdigest()[:16]


def resolved_with_this_pom(folder: Path) -> bool:
    try:
        return (folder / COMPLETE).read_text().strip() == pom_digest()
    except FileNotFoundError:
        return False


def resolved_jars(folder: Path | None = None) -> str | None:
    """The jars of a complete resolution, comma-separated for `spark.jars`; None when there is none."""
    try:
        folder = folder or default_dir()
    except importlib.metadata.PackageNotFoundError:  # no pyspark: nothing to run anyway
        return None
    if not (folder / COMPLETE).is_file():
        return None
    return ",".join(str(p) for p in sorted(folder.glob("*.jar"))) or None


def resolve(dest: Path, version: str, maven_repo: Path | None = None, offline: bool = False,
            mvn: str = "mvn", log=None) -> list[Path]:
    """Resolve the connector for Spark `version` into `dest` (replaced whole, marked complete last)."""
    # Maven takes a relative outputDirectory from the pom's folder, not from ours: absolute paths only.
    dest, maven_repo = Path(dest).absolute(), maven_repo and Path(maven_repo).absolute()
    if shutil.which(mvn) is None:
        raise FileNotFoundError(f"{mvn} not found: install Maven (e.g. `apt-get install maven`) and Java 17")
    partial = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=_made(dest.parent)))
    try:
        command = [mvn, "-q", "-B", "-f", str(POM), f"-Dspark.version={version}",
                   f"-Dspark.minor={minor_version(version)}", "dependency:copy-dependencies",
                   "-DincludeScope=runtime", f"-DoutputDirectory={partial}"]
        if maven_repo:
            command.insert(1, f"-Dmaven.repo.local={maven_repo}")
        if offline:
            command.insert(1, "--offline")
        done = subprocess.run(command, stdout=log or subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"mvn exited {done.returncode} resolving spark-sql-kafka {version}:\n{done.stdout or ''}")
        jars = sorted(partial.glob("*.jar"))
        if not any(j.name.startswith("spark-sql-kafka-") for j in jars):
            raise RuntimeError(f"mvn resolved no spark-sql-kafka jar for Spark {version}")
        build_runtime_jar(partial, version)
        (partial / COMPLETE).write_text(pom_digest() + "\n")
        shutil.rmtree(dest, ignore_errors=True)
        partial.rename(dest)
        return sorted(dest.glob("*.jar"))
    finally:
        shutil.rmtree(partial, ignore_errors=True)


def runtime_jar_name(version: str) -> str:
    """The runtime jar's file name: a hash of its Java sources and of the Spark they compile against."""
    digest = hashlib.sha256(version.encode())
    for source in sorted(JVM_SOURCES.rglob("*.java")):
        digest.update(source.relative_to(JVM_SOURCES).as_posix().encode() + b"\0" + source.read_bytes())
    return f"{RUNTIME_JAR_PREFIX}{digest.hexdigest()[:12]}.jar"


def build_runtime_jar(dest: Path, version: str) -> Path:
    """Compile ``jvm/`` against the installed pyspark's jars into ``dest`` (older builds removed)."""
    import pyspark

    javac = shutil.which("javac") or (os.environ.get("JAVA_HOME") and str(Path(os.environ["JAVA_HOME"]) / "bin" / "javac"))
    if not javac or not Path(javac).exists():
        raise FileNotFoundError("javac not found: the runtime's jar needs a JDK 17 (e.g. `apt-get install openjdk-17-jdk-headless`)")
    target = Path(dest) / runtime_jar_name(version)
    classpath = str(Path(pyspark.__file__).parent / "jars" / "*")
    with tempfile.TemporaryDirectory(prefix="streamapp-jvm-") as classes:
        sources = [str(p) for p in sorted(JVM_SOURCES.rglob("*.java"))]
        done = subprocess.run([javac, "--release", "17", "-nowarn", "-cp", classpath, "-d", classes, *sources],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"javac exited {done.returncode} compiling {JVM_SOURCES}:\n{done.stdout}")
        partial = target.with_suffix(".partial")
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as jar:
            for path in sorted(Path(classes).rglob("*.class")):
                jar.write(path, path.relative_to(classes).as_posix())
    for old in Path(dest).glob(f"{RUNTIME_JAR_PREFIX}*.jar"):
        old.unlink()
    partial.rename(target)
    return target


def _made(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = __doc__.split("\n\n")[1].replace("``", "`")
    parser.add_argument("--dest", type=Path, help="folder to fill (default: $STREAMAPP_CACHE/jars/spark-kafka-<version>, "
                        "where `streamapp run` looks)")
    parser.add_argument("--spark-version", help="Spark version of the connector (default: the installed pyspark's)")
    parser.add_argument("--maven-repo", type=Path, help="Maven's local repository (default: Maven's, ~/.m2/repository)")
    parser.add_argument("--offline", action="store_true", help="resolve from the local repository only")
    parser.add_argument("--force", action="store_true", help="resolve again even when the folder is complete")


def run(args: argparse.Namespace) -> int:
    version = args.spark_version or spark_version()
    dest = args.dest or default_dir(version)
    try:
        if not args.force and resolved_jars(dest) and resolved_with_this_pom(dest):
            if not (dest / runtime_jar_name(version)).is_file():  # resolved before its sources changed
                print(f"{dest}: built {build_runtime_jar(dest, version).name}")
            print(f"{dest}: already resolved")
            return 0
        jars = resolve(dest, version, args.maven_repo, args.offline)
    except (FileNotFoundError, RuntimeError) as exc:
        print(f"streamapp jars: {exc}", file=sys.stderr)
        return 1
    print(f"{dest}: {len(jars)} jars ({', '.join(j.name for j in jars)})")
    return 0
