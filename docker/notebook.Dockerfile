# JupyterLab with the Scala kernel of notebooks/ (Spark's spark-shell with Warren's jars), on
# the image of docker/Dockerfile. Build from the repository root, after that image:
#   docker build -f docker/notebook.Dockerfile -t warren/notebook:0.1.0-SNAPSHOT .
ARG WARREN_IMAGE=warren/spark:0.1.0-SNAPSHOT
FROM ${WARREN_IMAGE}
USER 0
# Ubuntu's python3 follows the base image's release (a pinned revision would break at its next
# security update).
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv \
 && rm -rf /var/lib/apt/lists/*
COPY notebooks /opt/warren/notebooks
RUN python3 -m venv /opt/warren/venv \
 && /opt/warren/venv/bin/pip install --no-cache-dir -r /opt/warren/notebooks/requirements.txt /opt/warren/notebooks/kernel \
 && /opt/warren/venv/bin/python -m warren_spark_kernel.install --sys-prefix \
      --env SPARK_HOME=/opt/spark --env WARREN_LOG4J2=/opt/warren/conf/log4j2-quiet.properties \
 && chown -R 185:185 /opt/warren/notebooks
# The base image's user spark.
USER 185
WORKDIR /opt/warren/notebooks
EXPOSE 8888
# The kernel's master and the driver's address come from the environment (compose.yml).
ENTRYPOINT ["/opt/warren/venv/bin/jupyter", "lab", "--ip=0.0.0.0", "--no-browser", "--notebook-dir=/opt/warren/notebooks"]
