"""docker-compose.yml and .env.example are checked statically (no Docker engine runs here)."""

import re
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def _compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_compose_has_the_full_stack() -> None:
    services = _compose()["services"]
    assert {"postgres", "redis", "web", "worker", "beat", "runner"} <= set(services)
    assert services["runner"]["profiles"] == ["runner"]  # GPU hosts only
    assert "--concurrency 1" in " ".join(services["runner"]["command"])


def test_app_services_share_one_image_and_wait_for_their_dependencies() -> None:
    services = _compose()["services"]
    for name in ("web", "worker", "beat", "migrate"):
        assert services[name]["image"] == "perfwatch:latest", name
        assert services[name]["build"]["target"] == "app", name
    for name in ("web", "worker", "beat", "migrate"):
        assert "depends_on" in services[name], name
    for name in ("postgres", "redis"):
        assert "healthcheck" in services[name]


def test_every_setting_the_app_reads_is_documented_in_env_example() -> None:
    documented = set(re.findall(r"^([A-Z_]+)=", (ROOT / ".env.example").read_text(), re.M))
    sources = "\n".join(p.read_text() for p in (ROOT / "dashboard").rglob("*.py")) + "\n".join(
        p.read_text() for p in (ROOT / "workers").rglob("*.py")
    )
    read = set(re.findall(r"env\.(?:str|bool|int|list|db|float)\(\s*\"([A-Z_]+)\"", sources))
    assert read, "no environment reads found"
    assert read <= documented, f"undocumented: {sorted(read - documented)}"


def _env_file_keys(text: str) -> set[str]:
    return set(re.findall(r"^([A-Z][A-Z0-9_]*)=", text, re.M))


def test_compose_runner_systemd_unit_and_readme_set_exactly_what_a_runner_node_reads() -> None:
    from django.conf import settings

    from runners.envs import CACHE_DIR_VARIABLE
    from runners.node_setup import ENV_PYTHON_VARIABLE, NODE_OPTIONAL_VARIABLES

    expected = set(settings.RUNNER_NODE_VARIABLES)
    settings_source = (ROOT / "dashboard" / "settings.py").read_text()
    read_by_settings = set(
        re.findall(r"env\.(?:str|bool|int|list|db|float)\(\s*\"([A-Z_]+)\"", settings_source)
    )
    assert expected <= read_by_settings | {CACHE_DIR_VARIABLE, ENV_PYTHON_VARIABLE, *NODE_OPTIONAL_VARIABLES}
    assert "DATABASE_URL" not in expected

    compose_runner = _compose()["services"]["runner"]
    unit = (ROOT / "deploy" / "perfwatch-runner.service").read_text()
    env_file = (ROOT / "deploy" / "runner.env.example").read_text()
    readme = (ROOT / "README.md").read_text()
    readme_block = readme.split("# /etc/perfwatch/runner.env", 1)[1].split("```", 1)[0]

    assert set(compose_runner["environment"]) == expected
    assert _env_file_keys(env_file) == expected
    assert _env_file_keys(readme_block) == expected
    assert "EnvironmentFile=/etc/perfwatch/runner.env" in unit
    # Both start the worker on the queue and under the name the same two variables give.
    compose_command = " ".join(compose_runner["command"])
    assert "-Q runner.$${PERFWATCH_RUNNER_HARDWARE_CLASS}" in compose_command
    assert "--hostname $${PERFWATCH_RUNNER_NAME}@" in compose_command
    assert "-Q runner.${PERFWATCH_RUNNER_HARDWARE_CLASS}" in unit
    assert "--hostname ${PERFWATCH_RUNNER_NAME}@" in unit
    used = set(re.findall(r"\$\{([A-Z_]+)", unit + compose_command))
    assert used <= expected


def test_only_the_tls_proxy_is_published_and_nothing_secret_is_hard_coded() -> None:
    compose = _compose()
    services = compose["services"]
    published = {name for name, service in services.items() if service.get("ports")}
    assert published == {"proxy"}
    assert {port.split(":")[0] for port in services["proxy"]["ports"]} == {"80", "443"}
    assert services["web"]["expose"] == ["8000"]
    caddyfile = (ROOT / "deploy" / "Caddyfile").read_text()
    assert "reverse_proxy web:8000" in caddyfile and "{$PERFWATCH_DOMAIN}" in caddyfile
    assert "./deploy/Caddyfile:/etc/caddy/Caddyfile:ro" in services["proxy"]["volumes"]

    app = compose["x-app"]
    assert app["env_file"] == [{"path": ".env", "required": False}]
    text = (ROOT / "docker-compose.yml").read_text()
    # Every password and key is a variable from .env, never a literal; without it the service refuses.
    assert re.findall(r"postgres://perfwatch:([^@]*)@", text) == ["${POSTGRES_PASSWORD:-}"]
    assert set(re.findall(r"redis://:([^@]*)@", text)) == {"${REDIS_PASSWORD:-}"}
    # Every web worker shares one cache, in Redis beside the broker.
    assert app["environment"]["PERFWATCH_CACHE_URL"].startswith("redis://:${REDIS_PASSWORD:-}@redis:6379/")
    assert app["environment"]["SECRET_KEY"] == "${SECRET_KEY:-}"
    assert services["postgres"]["environment"]["POSTGRES_PASSWORD"] == "${POSTGRES_PASSWORD:-}"
    redis_command = " ".join(services["redis"]["command"])
    assert 'test -n "$$REDIS_PASSWORD" || {' in redis_command and "--requirepass" in redis_command
    assert "REDISCLI_AUTH" in " ".join(services["redis"]["healthcheck"]["test"])


def test_every_variable_the_central_services_need_is_in_the_production_example() -> None:
    # The runner service runs on GPU hosts from its own deploy/runner.env, not from this .env.
    compose = _compose()
    del compose["services"]["runner"]
    text = yaml.safe_dump(compose)
    needed = set(re.findall(r"\$\{([A-Z_]+):[?-]", text))
    example = set(re.findall(r"^([A-Z_]+)=", (ROOT / ".env.production.example").read_text(), re.M))
    assert {"SECRET_KEY", "POSTGRES_PASSWORD", "REDIS_PASSWORD", "PERFWATCH_DOMAIN"} <= needed
    assert needed <= example


def test_the_image_runs_as_a_non_root_user() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    users = re.findall(r"^USER\s+(\S+)", dockerfile, re.M)
    assert users and users[-1] not in ("root", "0")
    assert (
        f"useradd --system --uid 10001 --user-group --create-home --home-dir /home/{users[-1]} {users[-1]}"
        in (" ".join(dockerfile.split()))
    )
    # USER comes after every RUN: nothing the running image does has root's rights.
    assert dockerfile.rindex("USER ") > dockerfile.rindex("RUN ")


def _stages(dockerfile: str) -> dict[str, str]:
    """Each build stage's name and its text."""
    parts = re.split(r"^FROM\s+", dockerfile, flags=re.M)[1:]
    return {part.split("\n", 1)[0].split()[-1]: part for part in parts}


def test_the_runner_image_has_what_a_gpu_nodes_recipes_call() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    stages = _stages(dockerfile)
    assert {"app", "runner"} <= set(stages)
    runner = " ".join(stages["runner"].split())
    assert stages["runner"].split("\n", 1)[0].split()[0] == "app"  # the app image plus the tooling
    # The base's Debian release has the interpreter the environments are built with.
    assert re.match(r"python:3\.12-slim-bookworm\s+AS\s+app", dockerfile.split("FROM ", 1)[1])
    for package in ("python3.11", "python3.11-venv", "curl", "ca-certificates"):
        assert f" {package} " in f" {runner} ", package
    assert "pip install --no-cache-dir '.[runner]'" in runner  # uv and nvidia-ml-py
    assert "ENV PERFWATCH_ENV_PYTHON=/usr/bin/python3.11" in runner
    # The cache volume's mount point is the runner user's, so a fresh named volume is writable for it.
    assert "mkdir -p /cache/runs && chown -R perfwatch:perfwatch /cache" in runner
    assert re.findall(r"^USER\s+(\S+)", stages["runner"], re.M)[-1] == "perfwatch"

    pyproject = (ROOT / "pyproject.toml").read_text()
    runner_extra = re.search(r"^runner = \[(.*)\]", pyproject, re.M)
    assert runner_extra and "uv==" in runner_extra.group(1) and "nvidia-ml-py==" in runner_extra.group(1)


def test_the_compose_runner_is_built_for_gpus_with_a_writable_cache_and_shared_memory() -> None:
    runner = _compose()["services"]["runner"]
    assert runner["build"] == {"context": ".", "target": "runner"}
    assert runner["image"] == "perfwatch-runner:latest"
    assert runner.get("ipc") == "host" or int(str(runner.get("shm_size", "0")).rstrip("gGmM") or 0) >= 8
    assert "runner-cache:/cache" in runner["volumes"]
    assert runner["environment"]["PERFWATCH_CACHE_DIR"] == "/cache"
    assert runner["environment"]["PERFWATCH_WORK_DIR"].startswith("/cache/")
    assert runner["environment"]["PERFWATCH_ENV_PYTHON"].endswith("/usr/bin/python3.11}")
    (device,) = runner["deploy"]["resources"]["reservations"]["devices"]
    assert device["driver"] == "nvidia" and device["capabilities"] == ["gpu"]


def test_the_web_workers_run_with_the_config_that_gives_a_heavy_pages_memory_back() -> None:
    # The image, compose and the bench start gunicorn alike: with the hooks of dashboard.gunicorn_conf.
    config = ["--config", "python:dashboard.gunicorn_conf"]
    web = _compose()["services"]["web"]["command"]
    image = re.search(r'^CMD (\[.*"gunicorn".*\])$', (ROOT / "Dockerfile").read_text(), re.M)
    bench = (ROOT / "lab" / "bench.py").read_text()
    assert image is not None
    assert " ".join(config) in " ".join(web) and " ".join(config) in " ".join(yaml.safe_load(image.group(1)))
    assert '"--config",\n            "python:dashboard.gunicorn_conf",' in bench


def test_a_large_block_freed_in_a_web_worker_goes_back_to_the_system() -> None:
    import ctypes

    from dashboard import gunicorn_conf

    def resident_mb() -> float:
        status = Path("/proc/self/status").read_text()
        return int(re.search(r"VmRSS:\s+(\d+)", status).group(1)) / 1024  # type: ignore[union-attr]

    assert gunicorn_conf._LIBC is not None  # glibc, as in the image
    gunicorn_conf.post_fork(None, None)
    # 16 MB touched and freed, then three blocks of 8 MB at once: under glibc's own rule the first free
    # raises its threshold to 16 MB, so the three come from the heap and stay resident (24 MB) once freed.
    before = resident_mb()
    block = ctypes.create_string_buffer(16 << 20)
    del block
    blocks = [ctypes.create_string_buffer(8 << 20) for _ in range(3)]
    del blocks
    gunicorn_conf.post_request(None, None, None, None)
    assert resident_mb() - before < 4


def test_the_workers_fork_from_a_master_that_loaded_the_app_and_its_views_without_a_connection() -> None:
    # A fresh interpreter, as gunicorn's master: after its ready hook the views' modules are imported (the
    # first request of each worker no longer pays for them), and neither the database nor the cache was
    # connected, which the forked workers would otherwise share.
    from dashboard import gunicorn_conf

    probe = (
        "import sys, django; django.setup()\n"
        "from django.db import connection\n"
        "from dashboard import gunicorn_conf\n"
        "assert 'dashboard.web.views' not in sys.modules\n"
        "gunicorn_conf.when_ready(None)\n"
        "assert 'dashboard.web.views' in sys.modules and 'dashboard.web.timeline_data' in sys.modules\n"
        "assert connection.connection is None\n"
        "print('ok')\n"
    )
    found = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )

    assert gunicorn_conf.preload_app is True
    assert found.stdout.strip() == "ok", found.stderr
