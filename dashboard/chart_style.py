"""The look every chart shares, whichever app draws it: colours, font, grid and hover label.

A project-level module like dispatch.py: it imports nothing, so any app's figures may use it.
"""

from __future__ import annotations

# One colour per concurrency level, fixed by the level itself so a line keeps its colour whatever is
# filtered out; levels are usually powers of two, so log2 spreads them over the palette.
PALETTE: tuple[str, ...] = (
    "#2563eb",
    "#0d9488",
    "#db2777",
    "#ca8a04",
    "#7c3aed",
    "#ea580c",
    "#16a34a",
    "#0891b2",
    "#be123c",
)
FONT = "Inter, ui-sans-serif, system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif"
GRID = "#e9edf3"
MUTED = "#64748b"
HOVER_LABEL = {"bgcolor": "#0f172a", "bordercolor": "#0f172a", "font": {"color": "#f8fafc", "size": 12}}
