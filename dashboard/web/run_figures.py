"""The run page's telemetry chart: what each GPU did while the benchmark ran, built in Python."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dashboard.web.figures import MUTED, PALETTE, chart_layout

# (sample field, panel title, unit, factor applied to the sample): memory reads better in GiB.
TELEMETRY_PANELS: tuple[tuple[str, str, str, float], ...] = (
    ("sm_clock_mhz", "SM clock", "MHz", 1.0),
    ("power_w", "Power", "W", 1.0),
    ("temperature_c", "Temperature", "°C", 1.0),
    ("memory_used_mib", "Memory used", "GiB", 1 / 1024),
)


def telemetry_figure(*, samples: Sequence[Mapping[str, Any]]) -> go.Figure:
    """SM clock, power, temperature and memory over the benchmark's seconds, one line per GPU in every
    panel; clicking a GPU in the legend hides it everywhere."""
    by_gpu: dict[int, list[Mapping[str, Any]]] = defaultdict(list)
    for sample in samples:
        by_gpu[int(sample.get("gpu_index") or 0)].append(sample)
    figure = make_subplots(
        rows=2,
        cols=2,
        shared_xaxes=True,
        vertical_spacing=0.14,
        horizontal_spacing=0.09,
        subplot_titles=[f"{title} ({unit})" for _, title, unit, _ in TELEMETRY_PANELS],
    )
    for gpu_index, gpu_samples in sorted(by_gpu.items()):
        gpu_samples.sort(key=lambda sample: float(sample.get("elapsed_s") or 0))
        color = PALETTE[gpu_index % len(PALETTE)]
        elapsed = [float(sample.get("elapsed_s") or 0) for sample in gpu_samples]
        for panel, (field, title, unit, factor) in enumerate(TELEMETRY_PANELS):
            values = [
                None if sample.get(field) is None else float(sample[field]) * factor for sample in gpu_samples
            ]
            figure.add_trace(
                go.Scatter(
                    x=elapsed,
                    y=values,
                    name=f"GPU {gpu_index}",
                    legendgroup=f"gpu-{gpu_index}",
                    showlegend=panel == 0,
                    mode="lines",
                    line={"color": color, "width": 1.4},
                    hovertemplate=(
                        f"GPU {gpu_index} · %{{x:.0f}} s<br>"
                        f"<b>%{{y:,.1f}} {unit}</b> {title.lower()}<extra></extra>"
                    ),
                ),
                row=panel // 2 + 1,
                col=panel % 2 + 1,
            )
    layout = chart_layout(unit="", height=520)
    axis_style = layout.pop("xaxis")
    layout.pop("yaxis")
    layout["margin"] = {"l": 56, "r": 16, "t": 36, "b": 40}
    figure.update_layout(
        layout,
        showlegend=len(by_gpu) > 1,
        legend={"orientation": "h", "x": 0, "xanchor": "left", "y": 1.08, "yanchor": "bottom"},
        hovermode="x unified" if len(by_gpu) > 1 else "closest",
    )
    figure.update_xaxes(**axis_style)
    figure.update_yaxes(**{key: value for key, value in axis_style.items() if key != "linecolor"})
    figure.update_xaxes(title_text="benchmark time (s)", title_font={"color": MUTED}, row=2)
    figure.update_annotations(font={"size": 12.5, "color": "#334155"})
    return figure
