"""The figure set-up every workload's PNGs share: matplotlib's pyplot on the Agg backend (no
display needed; imported only when a figure is drawn) and saving a titled figure. The figures
themselves are each workload's (``fitgpp/plots.py``, ``allox/plots.py``, ``hived/plots.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

def pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend (no display), imported on the first figure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(plt: Any, figure: Any, path: Path, title: str, *, bottom: float = 0.0) -> Path:
    """Title, lay out (leaving ``bottom`` of the height free, e.g. for a legend below the
    panels), write ``path`` as a PNG and close the figure."""
    figure.suptitle(title)
    figure.tight_layout(rect=(0, bottom, 1, 1))
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
