"""The steps of a run that need no teardown of their own: the commands that reproduce it by hand, and the
suite's accuracy task against the server that was just benchmarked."""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from pathlib import Path

from runners import reproduce
from runners.accuracy import (
    ACCURACY_DIR,
    AccuracyResult,
    lm_eval_argv,
    lm_eval_results_read,
    qa_accuracy_run,
    qa_items_load,
)
from runners.benchmark import guidellm_argv
from runners.install import InstalledEnv
from runners.process import command_run
from runners.run_control import shell_line
from runners.server import vllm_serve_argv, warm_up_body
from runners.suites import AccuracyKind, AccuracySpec, BenchmarkSpec, SuiteSpec

# Never phone home from a benchmark node, whatever the suite says.
SERVER_BASE_ENV = {"VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
# The tokenizer is local and the server is on this node: no hub, no proxy.
CLIENT_BASE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "NO_PROXY": "127.0.0.1,localhost",
    "no_proxy": "127.0.0.1,localhost",
}


def _model_reproduction(*, suite: SuiteSpec) -> tuple[str, tuple[str, ...], str, tuple[str, ...]]:
    """As _model_prepare, for the commands that reproduce the run in ${REPRO_DIR}."""
    if suite.serve.local_model is None:
        return suite.serve.model, (), suite.benchmark.tokenizer or suite.serve.model, ()
    directory = str(reproduce.REPRO_DIR / "model")
    python = reproduce.REPRO_DIR / "guidellm" / "bin" / "python"
    command = "PYTHONPATH=. " + reproduce.shell_line(
        argv=(str(python), "-m", "runners.tiny_model", directory)
    )
    tokenizer = suite.benchmark.tokenizer or directory
    return directory, ("--served-model-name", suite.serve.model), tokenizer, (command,)


def reproduction_commands(
    *,
    suite: SuiteSpec,
    benchmark: BenchmarkSpec,
    serve_env: Mapping[str, str],
    labels: Mapping[str, str],
    warm_up_text: str | None = None,
) -> dict[str, tuple[str, ...]]:
    """serve, warm-up and benchmark as a person runs them: fresh directory, free port, absolute paths;
    the warm-up sends the prompt the runner sent (`warm_up_text`, sized with the served tokenizer)."""
    model, model_args, tokenizer, model_commands = _model_reproduction(suite=suite)
    serve_argv = vllm_serve_argv(
        vllm=reproduce.REPRO_DIR / "vllm" / "bin" / "vllm",
        model=model,
        args=(*suite.serve.args, *model_args),
        port=reproduce.PORT,
    )
    bench_argv = guidellm_argv(
        guidellm=reproduce.REPRO_DIR / "guidellm" / "bin" / "guidellm",
        benchmark=benchmark,
        target=reproduce.SERVER_URL,
        model=suite.serve.model,
        tokenizer=tokenizer,
        labels=labels,
        output_path=reproduce.REPRO_DIR / reproduce.REPORT_NAME,
        objectives=suite.benchmark.objectives,
    )
    body = warm_up_body(
        model=suite.serve.model,
        request_format=benchmark.request_format,
        prompt_tokens=benchmark.data.prompt_tokens,
        output_tokens=benchmark.data.output_tokens,
        text=warm_up_text,
    )
    return {
        "model": model_commands,
        "serve": (reproduce.shell_line(argv=reproduce.port_argv(serve_argv), env=serve_env),),
        "warm_up": reproduce.warm_up_lines(
            request_format=benchmark.request_format, body=body, timeout_s=suite.timeouts.server_start_s
        ),
        "benchmark": (reproduce.shell_line(argv=bench_argv, env=CLIENT_BASE_ENV),),
    }


def accuracy_measure(
    *,
    accuracy: AccuracySpec,
    base_url: str,
    model: str,
    tokenizer: str,
    lm_eval: InstalledEnv | None,
    work_dir: Path,
    log_path: Path,
    seed: int,
    commands: dict[str, tuple[str, ...]],
    cancel: threading.Event,
) -> AccuracyResult:
    """The suite's accuracy task against the server that was just benchmarked."""
    if accuracy.kind is AccuracyKind.QA_JSONL:
        assert accuracy.path is not None  # the suite's validation requires it
        path = ACCURACY_DIR / accuracy.path
        items = qa_items_load(path=path)
        if accuracy.limit is not None:
            items = items[: accuracy.limit]
        commands["accuracy"] = (
            f"exact match of {len(items)} answers from {path.relative_to(ACCURACY_DIR.parent.parent)} "
            f"({accuracy.max_tokens} tokens, greedy) on {base_url}/v1/completions",
        )
        return qa_accuracy_run(
            name=accuracy.name,
            items=items,
            base_url=base_url,
            model=model,
            max_tokens=accuracy.max_tokens,
            num_concurrent=accuracy.num_concurrent,
            timeout_s=accuracy.timeout_s,
            cancel=cancel,
        )
    assert lm_eval is not None and accuracy.task is not None
    output_dir = work_dir / "lm-eval"
    argv = lm_eval_argv(
        lm_eval=lm_eval.executable(name="lm_eval"),
        task=accuracy.task,
        base_url=base_url,
        model=model,
        tokenizer=tokenizer,
        output_path=output_dir,
        num_concurrent=accuracy.num_concurrent,
        limit=accuracy.limit,
        seed=seed,
        max_gen_toks=accuracy.max_tokens,
    )
    commands["accuracy"] = (shell_line(argv=argv, env={}),)
    command_run(
        argv=argv,
        log_path=log_path,
        timeout_s=accuracy.timeout_s,
        env={**os.environ, **CLIENT_BASE_ENV},
        cancel=cancel,
    )
    return lm_eval_results_read(output_dir=output_dir, name=accuracy.name, task=accuracy.task)
