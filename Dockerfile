# Target `app`: one image for web, control worker and beat. Target `runner`: a GPU node's worker, the same
# image plus what its install recipes and telemetry call. Bookworm: its Python 3.11 builds the environments.
FROM python:3.12-slim-bookworm AS app
ENV PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN apt-get update && apt-get install -y --no-install-recommends git && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --user-group --create-home --home-dir /home/perfwatch perfwatch
WORKDIR /app
COPY pyproject.toml ./
COPY dashboard ./dashboard
COPY workers ./workers
COPY runners ./runners
COPY templates ./templates
COPY manage.py ./
# Static files are collected at build time, as root; at run time the app writes only under var/.
RUN pip install --no-cache-dir . && python manage.py collectstatic --no-input \
    && mkdir -p var/media && chown -R perfwatch:perfwatch var
USER perfwatch
EXPOSE 8000
CMD ["gunicorn", "dashboard.wsgi", "--config", "python:dashboard.gunicorn_conf", "--bind", "0.0.0.0:8000", "--workers", "3", "--timeout", "60"]

# A GPU runner node: Python 3.11 with venv for the vLLM and guidellm environments, uv and nvidia-ml-py
# (the runner extra), git and curl; the cache volume's mount point belongs to the runner user.
FROM app AS runner
USER root
RUN apt-get update && apt-get install -y --no-install-recommends python3.11 python3.11-venv curl \
        ca-certificates && rm -rf /var/lib/apt/lists/* \
    && pip install --no-cache-dir '.[runner]' \
    && mkdir -p /cache/runs && chown -R perfwatch:perfwatch /cache
ENV PERFWATCH_ENV_PYTHON=/usr/bin/python3.11 PERFWATCH_CACHE_DIR=/cache PERFWATCH_WORK_DIR=/cache/runs
USER perfwatch
CMD ["sh", "-c", "celery -A workers worker -Q runner.${PERFWATCH_RUNNER_HARDWARE_CLASS} --concurrency 1 --prefetch-multiplier 1 --hostname ${PERFWATCH_RUNNER_NAME}@%h --loglevel INFO"]
