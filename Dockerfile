# The two images of streamapp, from one Debian bookworm (or compatible) base:
#   operator  Python, kopf and the operator package; no JVM, no pyspark.  USER 10001.
#   runtime   JRE 17, Python, pyspark with the Kafka, S3A and Delta Lake jars and the runtime's own jar
#             (the JSON fast path) in Spark's jars folder, the runtime package; the same image runs
#             the driver (`streamapp run ...`) and the executors the driver starts (`executor`, see
#             entrypoint.sh).  USER 185 (Spark's).
#
# Self-contained: the repository is the context. Python packages come from PyPI (pip inside the
# image, with the image's own Python), the connector jars from Maven Central (Debian's Maven inside
# the image), the OS packages from the base's apt sources. Needs BuildKit (Docker 23+, or
# DOCKER_BUILDKIT=1 on Docker 20.10):
#   docker build --target operator -t streamapp/operator:dev .
#   docker build --target runtime -t streamapp/runtime:dev .
#   docker buildx build --platform linux/amd64,linux/arm64 --target runtime ...   (both architectures)
# BASE_IMAGE: any bookworm-based image; `make images` passes a local debootstrap of Debian's archive.
ARG BASE_IMAGE=debian:bookworm-slim

FROM ${BASE_IMAGE} AS base
ENV DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8 \
    PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 \
    PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
RUN apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends python3 python3-venv ca-certificates tini \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb

# --- each image's pinned requirements, read from pyproject.toml (the one list of pins).
FROM base AS requirements
COPY pyproject.toml /build/
COPY testbed/cluster/image/requirements.py /build/
RUN python3 /build/requirements.py /build/pyproject.toml /build

# --- Python environments: pip from PyPI, wheels built here for this Python and architecture. A
# network that re-signs TLS: pass its CA as `--secret id=cacerts,src=FILE` (trust-build-cas.sh).
FROM base AS build-base
ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt PIP_DISABLE_PIP_VERSION_CHECK=1
COPY testbed/cluster/image/trust-build-cas.sh /build/

FROM build-base AS venv-operator
COPY --from=requirements /build/requirements-operator.txt /build/
RUN --mount=type=cache,target=/root/.cache/pip --mount=type=secret,id=cacerts \
    sh /build/trust-build-cas.sh \
 && python3 -m venv /opt/venv \
 && /opt/venv/bin/pip install -q -r /build/requirements-operator.txt

FROM build-base AS venv-runtime
COPY --from=requirements /build/requirements-runtime.txt /build/
RUN --mount=type=cache,target=/root/.cache/pip --mount=type=secret,id=cacerts \
    sh /build/trust-build-cas.sh \
 && python3 -m venv /opt/venv \
 && /opt/venv/bin/pip install -q -r /build/requirements-runtime.txt

# --- the jars Spark needs beside pyspark's: the Kafka connector and the runtime's own jar
# (`streamapp jars`, as a local run gets them), and the S3A connector (its pom, versions.env's pins).
FROM venv-runtime AS jars
RUN apt-get update -qq \
 && mkdir -p /usr/share/man/man1 \
 && apt-get install -y -qq --no-install-recommends openjdk-17-jdk-headless maven \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb
COPY crds/streamapp_api /build/src/streamapp_api
COPY apps/streamapp_runtime/__init__.py apps/streamapp_runtime/jars.py apps/streamapp_runtime/connector-pom.xml \
     /build/src/streamapp_runtime/
COPY apps/streamapp_runtime/jvm /build/src/streamapp_runtime/jvm
COPY testbed/versions.env /build/
COPY testbed/maven/spark-s3/pom.xml /build/spark-s3/
RUN --mount=type=cache,target=/root/.m2 --mount=type=secret,id=cacerts \
    sh /build/trust-build-cas.sh \
 && set -a && . /build/versions.env && set +a \
 && PYTHONPATH=/build/src python -m streamapp_api jars --dest /build/jars --maven-repo /root/.m2/repository \
 && cd /build/spark-s3 \
 && mvn -q -B -Dmaven.repo.local=/root/.m2/repository -Dhadoop.version="$HADOOP_VERSION" \
      -Dawssdk.version="$AWSSDK_VERSION" -Ds3accelerator.version="$S3_ACCELERATOR_VERSION" \
      dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory=/build/jars \
 && rm -f /build/jars/.complete

# --- operator
FROM base AS operator
COPY --from=venv-operator /opt/venv /opt/venv
COPY crds/streamapp_api /opt/streamapp/streamapp_api
COPY operator/streamapp_operator /opt/streamapp/streamapp_operator
COPY testbed/cluster/image/streamapp /opt/venv/bin/streamapp
RUN echo /opt/streamapp >"$(/opt/venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/streamapp.pth" \
 && groupadd -g 10001 streamapp && useradd -u 10001 -g 10001 -d /tmp -M -s /usr/sbin/nologin streamapp \
 && python -c 'import kopf, streamapp_operator.handlers' \
 && ! python -c 'import pyspark' 2>/dev/null
USER 10001:10001
WORKDIR /tmp
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["python", "-m", "streamapp_operator"]

# --- runtime
FROM base AS runtime
RUN apt-get update -qq \
 && mkdir -p /usr/share/man/man1 \
 && apt-get install -y -qq --no-install-recommends openjdk-17-jre-headless procps \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb \
 && ln -sfn "$(dirname "$(dirname "$(readlink -f /usr/bin/java)")")" /opt/java
COPY --from=venv-runtime /opt/venv /opt/venv
RUN ln -sfn "$(/opt/venv/bin/python -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')" /opt/spark
COPY --from=jars /build/jars/ /opt/spark/jars/
ENV JAVA_HOME=/opt/java SPARK_HOME=/opt/spark PYSPARK_PYTHON=/opt/venv/bin/python \
    PYSPARK_DRIVER_PYTHON=/opt/venv/bin/python
# A class-data-sharing archive of the classes a driver loads, made by a short local Spark job: the
# driver's and the executors' JVMs map it and start with about half the CPU (docs/performance.md).
COPY apps/streamapp_runtime/class_archive.py /tmp/class_archive.py
RUN SPARK_LOCAL_IP=127.0.0.1 python /tmp/class_archive.py /opt/spark/streamapp-classes.jsa && rm /tmp/class_archive.py
ENV STREAMAPP_CLASS_ARCHIVE=/opt/spark/streamapp-classes.jsa
COPY crds/streamapp_api /opt/streamapp/streamapp_api
COPY apps/streamapp_runtime /opt/streamapp/streamapp_runtime
COPY testbed/cluster/image/streamapp /opt/venv/bin/streamapp
COPY testbed/cluster/image/entrypoint.sh /opt/entrypoint.sh
# the executors' preStop hook with spark.decommission.enabled (Spark's default path)
COPY testbed/cluster/image/decom.sh /opt/decom.sh
RUN echo /opt/streamapp >"$(/opt/venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/streamapp.pth" \
 && groupadd -g 185 spark && useradd -u 185 -g 185 -d /tmp -M -s /usr/sbin/nologin spark \
 && python -c 'import pyspark, streamapp_runtime.cli, pyspark.sql.streaming.proto.StateMessage_pb2' \
 && ls /opt/spark/jars/spark-sql-kafka-0-10_*.jar /opt/spark/jars/spark-kubernetes_*.jar \
      /opt/spark/jars/hadoop-aws-*.jar /opt/spark/jars/s3-transfer-manager-*.jar \
      /opt/spark/jars/streamapp-runtime-*.jar /opt/spark/jars/delta-spark_*.jar >/dev/null
USER 185:185
WORKDIR /tmp
ENTRYPOINT ["/opt/entrypoint.sh"]
CMD ["streamapp", "--help"]
