# llmload's container image: Locust with llmload's locustfiles and profiles (deploy/kubernetes/, docs/guides/kubernetes.md).
#
#   docker build -t llmload:0.1.0 .
#   docker run --rm llmload:0.1.0 -f /app/locustfiles/k26.py --headless      # the demo profile on the simulator
#
# The entrypoint is `locust`: arguments are Locust's and llmload's options. The package is installed editable from
# /app, so `--profile NAME` finds /app/profiles/NAME.yaml and the web UI's profile picker lists /app/profiles
# (harness.config.PROFILES_DIR: beside the package), and `llmload panels` its dashboard in /app/grafana/dashboards.
# Runs as user 10001 with a read-only root filesystem possible: HOME and matplotlib's cache are under /tmp.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HOME=/tmp \
    MPLCONFIGDIR=/tmp/matplotlib

WORKDIR /app
COPY pyproject.toml README.md ./
COPY harness ./harness
COPY locustfiles ./locustfiles
COPY profiles ./profiles
COPY grafana/dashboards ./grafana/dashboards
RUN pip install -e . \
    && groupadd --gid 10001 llmload \
    && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /tmp --shell /usr/sbin/nologin llmload \
    && mkdir /runs && chown 10001:10001 /runs

USER 10001:10001
EXPOSE 5557 8089 9646
ENTRYPOINT ["locust"]
CMD ["-f", "/app/locustfiles/k26.py", "--help"]
