"""Figures from package-benchmark's markdown output (`swift package benchmark --format markdown`).

Each benchmark is a "### name" heading, then a table whose wall-clock row holds the percentiles
p0, p25, p50, ...; its header names the unit.
"""

UNITS = {"(ns)": 1.0, "(μs)": 1e3, "(us)": 1e3, "(ms)": 1e6, "(s)": 1e9}


def p50_nanoseconds(path):
    """{benchmark name: p50 of wall-clock time per iteration, in nanoseconds}."""
    figures, name = {}, None
    for line in open(path, encoding="utf-8"):
        if line.startswith("### "):
            name = line[4:].strip()
        elif name and line.startswith("| Time (wall clock)"):
            unit = line.split("|")[1].split()[3]
            figures[name] = float(line.split("|")[4].strip()) * UNITS[unit]
    return figures


def require(figures, names, path, script):
    """Exits naming the first of `names` that `figures` lacks, with the output's tail."""
    for wanted in names:
        if wanted not in figures:
            raise SystemExit(f"{script}: the benchmarks gave no figure for {wanted!r}: {open(path, encoding='utf-8').read()[-2000:]}")
