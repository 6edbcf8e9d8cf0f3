# The two images of streamapp, from one Debian bookworm (or compatible) base:
#   operator  Python, kopf and the operator package; no JVM, no pyspark.  USER 10001.
#   runtime   JRE 17, Python, pyspark with the Kafka and S3A connector jars and the runtime's own jar
#             (the JSON fast path) in Spark's jars folder, the runtime package; the same image runs
#             the driver (`streamapp run ...`) and the executors the driver starts (`executor`, see
#             entrypoint.sh).  USER 185 (Spark's).
#
# Build with `make images` (testbed/cluster/images.sh): it stages the build context (the packages,
# wheels of the pinned requirements made by pip from PyPI, the connector jars resolved by Maven) and
# passes BASE_IMAGE. Any bookworm-based image works, e.g. BASE_IMAGE=debian:bookworm-slim; the
# project itself builds from a local debootstrap of Debian's archive.
ARG BASE_IMAGE=debian:bookworm-slim

FROM ${BASE_IMAGE} AS base
ENV DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8 \
    PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 \
    PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
RUN apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends python3 python3-venv ca-certificates tini \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb

# --- Python environments, installed from the staged wheels only (no index).
FROM base AS venv-operator
COPY wheels/ /wheels/
COPY requirements-operator.txt /wheels/
RUN python3 -m venv /opt/venv \
 && /opt/venv/bin/pip install -q --no-index --find-links /wheels -r /wheels/requirements-operator.txt

FROM base AS venv-runtime
COPY wheels/ /wheels/
COPY requirements-runtime.txt /wheels/
RUN python3 -m venv /opt/venv \
 && /opt/venv/bin/pip install -q --no-index --find-links /wheels -r /wheels/requirements-runtime.txt

# --- operator
FROM base AS operator
COPY --from=venv-operator /opt/venv /opt/venv
COPY src/streamapp_api /opt/streamapp/streamapp_api
COPY src/streamapp_operator /opt/streamapp/streamapp_operator
COPY bin/streamapp /opt/venv/bin/streamapp
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
COPY jars/ /opt/spark/jars/
COPY src/streamapp_api /opt/streamapp/streamapp_api
COPY src/streamapp_runtime /opt/streamapp/streamapp_runtime
COPY bin/streamapp /opt/venv/bin/streamapp
COPY entrypoint.sh /opt/entrypoint.sh
# the executors' preStop hook with spark.decommission.enabled (Spark's default path)
COPY decom.sh /opt/decom.sh
ENV JAVA_HOME=/opt/java SPARK_HOME=/opt/spark PYSPARK_PYTHON=/opt/venv/bin/python \
    PYSPARK_DRIVER_PYTHON=/opt/venv/bin/python
RUN echo /opt/streamapp >"$(/opt/venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/streamapp.pth" \
 && groupadd -g 185 spark && useradd -u 185 -g 185 -d /tmp -M -s /usr/sbin/nologin spark \
 && python -c 'import pyspark, streamapp_runtime.cli, pyspark.sql.streaming.proto.StateMessage_pb2' \
 && ls /opt/spark/jars/spark-sql-kafka-0-10_*.jar /opt/spark/jars/spark-kubernetes_*.jar \
      /opt/spark/jars/hadoop-aws-*.jar /opt/spark/jars/s3-transfer-manager-*.jar \
      /opt/spark/jars/streamapp-runtime-*.jar >/dev/null
USER 185:185
WORKDIR /tmp
ENTRYPOINT ["/opt/entrypoint.sh"]
CMD ["streamapp", "--help"]
