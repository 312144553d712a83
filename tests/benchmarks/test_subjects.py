import pytest

from dashboard.benchmarks.subjects import (
    change_class_from_paths,
    message_split,
    subject_pr_number,
    subject_reverted_pr,
)


def test_pr_number_is_the_squash_merge_suffix():
    assert subject_pr_number(subject="[Perf] Adaptive scheduler token budget for Kimi K3 (#50383)") == 50383


def test_pr_number_is_the_last_suffix_when_the_subject_names_several():
    subject = '[Bugfix] Follow-up to "KDA prefix checkpoints (#51311)" (#51725)'

    assert subject_pr_number(subject=subject) == 51725


def test_revert_subject_carries_the_revert_pr_as_its_number():
    subject = 'Revert "[Perf] Zero-copy mixed prefill/decode batches (#50484)" (#50601)'

    assert subject_pr_number(subject=subject) == 50601


@pytest.mark.parametrize(
    "subject",
    ["Merge branch 'main' into kimi-k3", "[Misc] Fix #50212 prefix cache", "Bump version (# 12)", ""],
)
def test_subject_without_a_pr_suffix_has_no_pr_number(subject: str):
    assert subject_pr_number(subject=subject) is None


def test_squash_merged_revert_names_the_reverted_pr():
    subject = 'Revert "[Perf] Zero-copy mixed prefill/decode batches (#50484)" (#50601)'

    assert subject_reverted_pr(subject=subject, body="Reverts vllm-project/vllm#50484") == 50484


def test_revert_pushed_directly_names_the_reverted_pr():
    subject = 'Revert "[Perf] Zero-copy mixed prefill/decode batches (#50484)"'

    assert subject_reverted_pr(subject=subject, body="This reverts commit 0f3c9a7e.") == 50484


def test_revert_of_a_revert_names_the_revert_it_undoes():
    subject = 'Revert "Revert "[Perf] Zero-copy mixed batches (#50484)" (#50601)" (#50640)'

    assert subject_reverted_pr(subject=subject, body="") == 50601


def test_tagged_unquoted_revert_names_the_reverted_pr():
    assert subject_reverted_pr(subject="[CI] Revert #52789 (#52801)", body="") == 52789


def test_revert_of_a_subject_without_pr_falls_back_to_the_body():
    subject = 'Revert "[Perf] Deferred MXFP4 finalization for #50212"'
    body = "The speculator loads 3x slower.\n\nReverts vllm-project/vllm#52789\n"

    assert subject_reverted_pr(subject=subject, body=body) == 52789


@pytest.mark.parametrize(
    "body",
    [
        "Reverts #52789",
        "This reverts PR #52789 because it broke DCP.",
        "reverts https://github.com/vllm-project/vllm/pull/52789",
    ],
)
def test_body_that_says_it_reverts_a_pr_names_it(body: str):
    assert subject_reverted_pr(subject="[Bugfix] Back out MXFP4 deferral (#52810)", body=body) == 52789


@pytest.mark.parametrize(
    ("subject", "body"),
    [
        ("[Perf] Adaptive scheduler token budget for Kimi K3 (#50383)", "Fixes #50212"),
        ("[Bugfix] Revert to eager mode when CUDA graphs are off (#50999)", ""),
        ('Revert "[Misc] Fix #50212 prefix cache"', "This reverts commit 0f3c9a7e."),
        ("[Doc] Explain how reverts are labelled (#51000)", "Nothing here reverts #1 on its first line."),
    ],
)
def test_commit_that_reverts_no_known_pr_has_none(subject: str, body: str):
    assert subject_reverted_pr(subject=subject, body=body) is None


@pytest.mark.parametrize(
    "paths",
    [
        ["docs/features/spec_decode.md"],
        ["tests/v1/spec_decode/test_dspark.py", "tests/kernels/test_kda.py"],
        [".github/workflows/pre-commit.yml", ".buildkite/test-pipeline.yaml"],
        ["README.md", "vllm/model_executor/layers/fla/README.md"],
        ["benchmarks/benchmark_serving_kimi.py", "examples/offline_inference/spec_decode.py"],
        ["requirements/test.txt", "requirements/docs.txt", "requirements/nightly_torch_test.txt"],
        [".pre-commit-config.yaml", "mkdocs.yaml", "LICENSE"],
        [],
    ],
)
def test_docs_tests_and_ci_only_changes(paths: list[str]):
    assert change_class_from_paths(paths=paths) == "docs_tests_ci"


@pytest.mark.parametrize(
    "paths",
    [
        ["vllm/v1/core/sched/scheduler.py"],
        ["vllm/model_executor/layers/fused_moe/configs/E=384,N=256,device_name=NVIDIA_B300.json"],
        ["vllm/benchmarks/serve.py"],
        ["vllm/model_executor/layers/fla/ops/kda.py", "tests/v1/test_kda.py", "docs/models.md"],
        ["tools/install_deepgemm.sh"],
    ],
)
def test_python_runtime_changes(paths: list[str]):
    assert change_class_from_paths(paths=paths) == "python"


@pytest.mark.parametrize(
    "paths",
    [
        ["csrc/moe/mxfp4_grouped_gemm.cu"],
        ["csrc/attention/mla/kda_checkpoint.cuh", "vllm/_custom_ops.py"],
        ["vllm/some_extension/binding.cpp"],
        ["CMakeLists.txt"],
        ["cmake/external_projects/flashmla.cmake"],
        ["setup.py"],
        ["pyproject.toml"],
        ["requirements/cuda.txt"],
        ["requirements/common.txt", "tests/test_config.py"],
        ["docker/Dockerfile"],
        ["Dockerfile.rocm"],
    ],
)
def test_native_kernel_and_build_changes(paths: list[str]):
    assert change_class_from_paths(paths=paths) == "native"


def test_mixed_change_takes_the_heaviest_class():
    paths = ["docs/usage.md", "vllm/v1/core/sched/scheduler.py", "csrc/ops.h", "tests/test_ops.py"]

    assert change_class_from_paths(paths=paths) == "native"


def test_markdown_next_to_kernels_does_not_make_a_native_change():
    assert change_class_from_paths(paths=["csrc/quantization/README.md"]) == "docs_tests_ci"


def test_paths_may_be_any_iterable():
    assert change_class_from_paths(paths=iter(("docs/a.md", "vllm/a.py"))) == "python"


def test_message_splits_into_a_one_line_subject_and_a_body():
    message = "[Perf] Adaptive scheduler\ntoken budget (#50383)\n\n\nSigned-off-by: Woosuk Kwon\n"

    assert message_split(message=message) == (
        "[Perf] Adaptive scheduler token budget (#50383)",
        "Signed-off-by: Woosuk Kwon",
    )


def test_message_without_body_has_an_empty_body():
    assert message_split(message="[Doc] Kimi K3 recipe (#50512)\n") == ("[Doc] Kimi K3 recipe (#50512)", "")
