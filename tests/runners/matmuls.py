"""The op a vLLM CPU build runs a model's linear layers through depends on the CPU it runs on: its oneDNN
kernel (`_C::onednn_mm`) where the CPU has the instructions that kernel is built for (AVX-512 and up),
torch's own GEMM (`aten::mm`) elsewhere. Either is called once per linear layer per engine step."""

from __future__ import annotations

from collections.abc import Iterable

MATMUL_OPS = ("_C::onednn_mm", "aten::mm")


def matmul_op(names: Iterable[str]) -> str | None:
    """The matmul op among a profile's op names, oneDNN's first; None when neither ran."""
    present = set(names)
    return next((name for name in MATMUL_OPS if name in present), None)
