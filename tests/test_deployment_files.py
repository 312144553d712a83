"""docker-compose.yml and .env.example are checked statically (no Docker engine runs here)."""

import re
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
    for name in ("web", "worker", "beat", "migrate", "runner"):
        assert services[name]["image"] == "perfwatch:latest", name
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
