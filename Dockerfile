# One image for web, control worker and beat. GPU runner nodes add the runner tooling on top (see README).
FROM python:3.12-slim
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
CMD ["gunicorn", "dashboard.wsgi", "--bind", "0.0.0.0:8000", "--workers", "3", "--timeout", "60"]
