"""Timeline pictures of a decoded `ptxkit.trace.Trace` (matplotlib, the ``plot`` extra).

>>> trace.plot("timeline.svg", ctas=[0, 1])  # doctest: +SKIP
"""

from __future__ import annotations

import numpy as np


def chosen_ctas(trace, ctas=None, most: int = 2) -> list[int]:
    """The CTAs to draw: `ctas` as given, else up to `most` CTAs that ran on the SM of
    the first CTA with spans (they share its clock, so their overlap is exact)."""
    if ctas is not None:
        return [int(c) for c in ctas]
    spans = trace.spans
    if not len(spans):
        return []
    first = int(spans["cta"][0])
    sm = trace.sm_of_cta[first]
    same = sorted({int(c) for c in spans["cta"][spans["sm"] == sm]})
    return same[:most]


def draw_timeline(trace, path: str, ctas=None, title: str | None = None, width: float = 11.0, warps=None,
                  window=None) -> None:
    """Draw one row per recorded warp of the chosen CTAs (`chosen_ctas`; only `warps` when
    given), a bar per span coloured by its point, nested spans thinner and on top, over
    the whole time or `window` (µs, from the first record of those CTAs); write PNG or SVG
    to `path`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    spans = trace.spans
    selected = chosen_ctas(trace, ctas)
    rows = sorted({(int(c), int(w)) for c, w in zip(spans["cta"], spans["warp"])
                   if int(c) in selected and (warps is None or int(w) in warps)})
    if not rows:
        raise ValueError("no spans to draw for the chosen CTAs")
    row_of = {key: i for i, key in enumerate(rows)}
    points = [trace.points[p] for p in np.unique(spans["point"])]
    names = sorted({p.name for p in points})
    whole = {p.name for p in points if p.category == "function"}  # the kernel's span: a grey background
    palette = plt.get_cmap("tab20" if len(names) - len(whole) > 10 else "tab10")
    colour = {name: palette(i % palette.N) for i, name in enumerate(n for n in names if n not in whole)}
    colour.update({name: "0.85" for name in whole})
    mine = spans[np.isin(spans["cta"], selected)]
    start = mine["start"].min()
    if warps is not None:
        mine = mine[np.isin(mine["warp"], list(warps))]
    if window is not None:
        low, high = start + 1000.0 * window[0], start + 1000.0 * window[1]
        mine = mine[(mine["end"] > low) & (mine["start"] < high)]
    figure, axes = plt.subplots(figsize=(width, 0.9 + 0.28 * len(rows)))
    used = set()
    for span in sorted(mine, key=lambda s: s["depth"]):
        name = trace.points[span["point"]].name
        row = row_of[(int(span["cta"]), int(span["warp"]))]
        height = max(0.85 - 0.22 * int(span["depth"]), 0.3)
        axes.broken_barh([((span["start"] - start) / 1000.0, (span["end"] - span["start"]) / 1000.0)],
                         (row - height / 2, height), facecolors=colour[name], edgecolor="none")
        used.add(name)
    axes.set_yticks(range(len(rows)))
    axes.set_yticklabels([f"CTA {c} warp {w}" for c, w in rows], fontsize=7)
    for i in range(1, len(rows)):  # a line between CTAs
        if rows[i][0] != rows[i - 1][0]:
            axes.axhline(i - 0.5, color="0.6", linewidth=0.6)
    axes.invert_yaxis()
    if window is not None:
        axes.set_xlim(*window)
    axes.set_xlabel("µs from the first record of these CTAs")
    axes.set_title(title or f"{trace.layout.kernel}: SM {trace.sm_of_cta[selected[0]]}, CTA {', '.join(map(str, selected))}",
                   fontsize=9)
    axes.legend(handles=[Patch(color=colour[n], label=n) for n in names if n in used], fontsize=7,
                loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    axes.grid(axis="x", linewidth=0.3, color="0.85")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
