# topicpulse in a container, its database outside it on the /data volume (docs/deploy.md).
#
#   docker build -t topicpulse .
#   docker run -d --name topicpulse -v topicpulse-data:/data -e TELEGRAM_BOT_TOKEN=... topicpulse
#
# PYTHON_IMAGE is any Debian-based image with python3 (3.11 or newer) and its venv module:
# the official slim image by default. PIP_INDEX_URL points pip at a mirror when PyPI is out
# of reach (the container test builds from Debian's own packages and a local index this way).
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ARG PIP_INDEX_URL=https://pypi.org/simple
ENV PIP_INDEX_URL=${PIP_INDEX_URL} PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
# The dependencies first, in a layer of their own: a change to the code alone reuses it.
COPY pyproject.toml ./
RUN python3 -m venv /opt/topicpulse \
 && python3 -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" > requirements.txt \
 && /opt/topicpulse/bin/pip install -r requirements.txt
COPY README.md ./
COPY migrations migrations
COPY src src
RUN /opt/topicpulse/bin/pip install --no-deps .

FROM ${PYTHON_IMAGE}
# A user of its own (no login, no home outside the volume) owns the data and nothing else.
RUN groupadd --system --gid 10001 topicpulse \
 && useradd --system --uid 10001 --gid topicpulse --home-dir /data --shell /usr/sbin/nologin topicpulse \
 && mkdir -p /data && chown topicpulse:topicpulse /data
COPY --from=build /opt/topicpulse /opt/topicpulse
ENV PATH=/opt/topicpulse/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    TOPICPULSE_DB=/data/topicpulse.db \
    TOPICPULSE_WEB_PORT=8080
USER topicpulse
WORKDIR /data
VOLUME ["/data"]
EXPOSE 8080
# Liveness: 200 while the process answers and its store reads (docs/deploy.md, "Health").
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD ["python3", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('TOPICPULSE_WEB_PORT', '8080'), timeout=4)"]
# The bot is PID 1: python-telegram-bot stops on SIGTERM, lets the sends in flight finish and
# closes the database (docker stop waits 10 s by default before SIGKILL; nothing is lost either way).
STOPSIGNAL SIGTERM
ENTRYPOINT ["topicpulse"]
CMD ["run"]
