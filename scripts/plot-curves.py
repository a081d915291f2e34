#!/usr/bin/env python3
"""Draws the scaling curves of `prefskv-bench curves` (its --json output) as log-log plots.

    scripts/plot-curves.py Benchmarks/results/curves.json Documentation

writes <dir>/curves-keys.png (set, get, overwrite, cold open, peak RSS, file size against the number of keys)
and <dir>/curves-values.png (the same against the size of a value): one line per engine, the median of each
point, a bar from its fastest to its slowest process. Needs matplotlib (`make bench` installs it with pip).
"""
import json
import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402

ENGINES = [
    ("prefskv", "PrefsKV", "tab:blue", "o"),
    ("prefskv-encrypted", "PrefsKV sealed", "tab:cyan", "s"),
    ("sqlite", "SQLite (WAL, txn per set)", "tab:orange", "^"),
    ("lmdb-nosync", "LMDB (NOSYNC)", "tab:green", "D"),
]
TITLES = {
    "set": "set",
    "get": "get (warm)",
    "overwrite": "overwrite every key once",
    "cold": "cold open + first read (new process)",
    "rss": "peak RSS of the process",
    "file": "file size on disk",
}


def unit(metric):
    if metric == "rss":
        return "MiB", 1 / 1024
    if metric == "file":
        return "KiB", 1 / 1024
    if metric == "cold":
        return "µs", 1 / 1000
    return "ns per operation", 1


def size_label(n):
    if n < 1024:
        return f"{n} B"
    if n < 1 << 20:
        return f"{n // 1024} KiB"
    return f"{n >> 20} MiB"


def count_label(n):
    return f"{n:,}"


def plot(points, axis, metrics, path, title, quick):
    columns = 3
    rows = (len(metrics) + columns - 1) // columns
    figure, panels = plt.subplots(rows, columns, figsize=(15, 4.6 * rows), squeeze=False)
    for panel, metric in zip(panels.flat, metrics):
        label, factor = unit(metric)
        for engine, name, color, marker in ENGINES:
            series = sorted(
                (p["x"], p["samples"])
                for p in points
                if p["axis"] == axis and p["metric"] == metric and p["engine"] == engine and p["samples"]
            )
            if not series:
                continue
            xs = [x for x, _ in series]
            mid = [statistics.median(s) * factor for _, s in series]
            low = [m - min(s) * factor for m, (_, s) in zip(mid, series)]
            high = [max(s) * factor - m for m, (_, s) in zip(mid, series)]
            panel.errorbar(xs, mid, yerr=[low, high], label=name, color=color, marker=marker, markersize=4,
                           linewidth=1.5, capsize=2)
        panel.set_xscale("log")
        panel.set_yscale("log")
        panel.set_title(TITLES[metric])
        panel.set_ylabel(label)
        panel.set_xlabel("keys in the store" if axis == "keys" else "bytes per value")
        ticks = sorted({p["x"] for p in points if p["axis"] == axis})
        panel.set_xticks(ticks)
        panel.set_xticklabels([count_label(t) if axis == "keys" else size_label(t) for t in ticks], rotation=30)
        panel.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        panel.grid(True, which="major", linewidth=0.4, alpha=0.6)
        plain = matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}")
        panel.yaxis.set_major_formatter(plain)
        low, high = panel.get_ylim()
        # Within one decade a log axis has no major tick: label its minor ones, plainly.
        panel.yaxis.set_minor_formatter(plain if high / low < 10 else matplotlib.ticker.NullFormatter())
    for panel in list(panels.flat)[len(metrics):]:
        panel.set_visible(False)
    handles, labels = panels.flat[0].get_legend_handles_labels()
    figure.suptitle(title + (" (quick mode: not for reading)" if quick else ""), y=0.99)
    figure.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.955), ncol=len(ENGINES), frameon=False)
    figure.tight_layout(rect=(0, 0, 1, 0.92))
    figure.savefig(path, dpi=90, metadata={"Software": None})
    plt.close(figure)


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: plot-curves.py CURVES.json OUTPUT-DIRECTORY")
    with open(sys.argv[1]) as f:
        results = json.load(f)
    points, quick, out = results["points"], results["quick"], sys.argv[2]
    plot(points, "keys", ["set", "get", "overwrite", "cold", "rss", "file"], f"{out}/curves-keys.png",
         "Cost against the number of keys (ints; log-log; median, bar = fastest..slowest process)", quick)
    plot(points, "value bytes", ["set", "get", "cold", "rss", "file"], f"{out}/curves-values.png",
         "Cost against the size of a value (16 keys rewritten in turn; log-log)", quick)
    print(f"plot-curves: wrote {out}/curves-keys.png and {out}/curves-values.png")


if __name__ == "__main__":
    main()
