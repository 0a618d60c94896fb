"""Draws a flame graph (SVG) of a profile, for docs/performance.md ("Flame graphs of the two rows").

    perf record -F 1999 -g -p PID -o perf.data -- sleep 8
    perf script -i perf.data -F comm,tid,ip,sym,dso > perf.txt
    python3 bench/flamegraph.py --title TITLE [--microseconds US] perf.txt out.svg

Each sample's stack is drawn from its thread's name (the root) up to the frame it was in (the
top); a frame's width is its share of the samples. Swift names are demangled with
`swift-demangle --simplified` when it is on the PATH or in /opt/swift. With `--microseconds`, the
CPU the whole profile stands for, in µs a registration, each frame's tooltip also gives its
share in µs a registration: where each microsecond goes. Frames under `--min-share` of the
samples are left out (their time stays in the frame below them), which keeps the file small.
Prints the heaviest top-of-stack frames and threads as text too.
"""
import argparse
import collections
import html
import os
import shutil
import subprocess
import zlib

WIDTH = 1200
FRAME_HEIGHT = 16
FONT_SIZE = 11
CHAR_WIDTH = 6.2  # about what one character of an 11 px monospace font takes
MARGIN_TOP = 40


def samples(path):
    """Each sample as (thread name, [(symbol, dso), ...] leaf first), from `perf script -F comm,tid,ip,sym,dso`."""
    comm, stack = None, []
    for line in open(path, errors="replace"):
        if not line.strip():
            if comm is not None:
                yield comm, stack
            comm, stack = None, []
        elif not line[0].isspace():
            comm = line.split()[0]
        else:
            parts = line.strip().split(None, 1)
            rest = parts[1] if len(parts) > 1 else "[unknown]"
            symbol, _, dso = rest.rpartition(" (")
            stack.append((symbol or rest, dso.rstrip(")")))
    if comm is not None:
        yield comm, stack


def demangler():
    """Maps mangled Swift names to short ones, by one swift-demangle process for all of them."""
    tool = shutil.which("swift-demangle") or ("/opt/swift/usr/bin/swift-demangle" if os.path.exists("/opt/swift/usr/bin/swift-demangle") else None)

    def demangle(names):
        names = sorted(names)
        if not tool or not names:
            return {name: name for name in names}
        out = subprocess.run([tool, "--simplified"], input="\n".join(names) + "\n", capture_output=True, text=True, check=True).stdout
        lines = out.split("\n")
        return {name: short(lines[i]) if i < len(lines) and lines[i] else name for i, name in enumerate(names)}

    return demangle


def short(name):
    """A demangled name without the words that only say how the compiler made it."""
    for prefix in ("specialized ", "merged ", "outlined copy of ", "outlined consume of "):
        if name.startswith(prefix):
            name = name[len(prefix):]
    return name.replace("partial apply for ", "").replace("thunk for ", "")


def thread(comm):
    """A thread's name as the root of its frames: Linux keeps 15 characters of it, so libdispatch's
    worker threads (where the commit queue runs) show the end of theirs."""
    if comm.endswith("qos.overcommit") or comm.endswith("default-qos"):
        return f"dispatch worker ({comm})"
    return comm


def kind(symbol, dso):
    """The colour family of a frame: the kernel, the Swift runtime and C library, NIO, this code, the rest."""
    if dso.startswith("[kernel"):
        return "kernel"
    if os.path.basename(dso).startswith(("libswiftCore", "libc.", "ld-linux", "libdispatch", "libswiftDispatch", "[vdso")):
        return "runtime"
    if "NIO" in symbol:
        return "nio"
    if os.path.basename(dso) in ("registryd", "registryload"):
        return "registry"
    return "other"


PALETTE = {"kernel": (230, 140, 60), "runtime": (190, 190, 160), "nio": (110, 160, 220), "registry": (110, 190, 110), "other": (220, 110, 110)}


def colour(name, family):
    """A shade of the family's colour that stays the same for a name from run to run."""
    r, g, b = PALETTE[family]
    shade = zlib.crc32(name.encode()) % 40 - 20
    return f"rgb({max(0, min(255, r + shade))},{max(0, min(255, g + shade))},{max(0, min(255, b + shade))})"


def tree(stacks):
    """The frames as a tree of dicts: each node {'count', 'family', 'children'}, keyed by name."""
    root = {"count": 0, "family": "other", "children": {}}
    for frames in stacks:
        root["count"] += 1
        node = root
        for name, family in frames:
            child = node["children"].setdefault(name, {"count": 0, "family": family, "children": {}})
            child["count"] += 1
            node = child
    return root


def draw(root, title, subtitle, microseconds, min_share):
    total = root["count"]
    rows = []  # (depth, x, width, name, node)

    def walk(node, depth, x):
        for name, child in sorted(node["children"].items()):
            if child["count"] / total < min_share:
                continue
            width = child["count"] / total * WIDTH
            rows.append((depth, x, width, name, child))
            walk(child, depth + 1, x)
            x += width

    walk(root, 0, 0.0)
    depth = 1 + max((row[0] for row in rows), default=0)
    height = MARGIN_TOP + depth * FRAME_HEIGHT + 10
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" font-family="monospace" font-size="{FONT_SIZE}">',
        f'<rect width="{WIDTH}" height="{height}" fill="white"/>',
        f'<text x="{WIDTH / 2}" y="16" text-anchor="middle" font-size="14">{html.escape(title)}</text>',
        f'<text x="{WIDTH / 2}" y="32" text-anchor="middle" fill="#555">{html.escape(subtitle)}</text>',
    ]
    for level, x, width, name, node in rows:
        y = height - 10 - (level + 1) * FRAME_HEIGHT
        share = node["count"] / total
        tip = f"{name}: {node['count']} samples, {share * 100:.2f}%"
        if microseconds:
            tip += f", {share * microseconds:.3f} µs a registration"
        out.append(f"<g><title>{html.escape(tip)}</title>")
        out.append(
            f'<rect x="{x:.1f}" y="{y}" width="{max(width - 0.5, 0.1):.1f}" height="{FRAME_HEIGHT - 1}" fill="{colour(name, node["family"])}"/>'
        )
        fits = int((width - 4) / CHAR_WIDTH)
        if fits >= 3:
            label = name if len(name) <= fits else name[: fits - 2] + ".."
            out.append(f'<text x="{x + 2:.1f}" y="{y + FRAME_HEIGHT - 4}">{html.escape(label)}</text>')
        out.append("</g>")
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    parser = argparse.ArgumentParser(description="Draws a flame graph (SVG) from `perf script -F comm,tid,ip,sym,dso` output.")
    parser.add_argument("--title", required=True)
    parser.add_argument("--microseconds", type=float, help="the CPU the whole profile stands for, in µs a registration")
    parser.add_argument("--min-share", type=float, default=0.0005, help="frames under this share of the samples are left out")
    parser.add_argument("perf_script")
    parser.add_argument("svg")
    args = parser.parse_args()

    raw = list(samples(args.perf_script))
    names = demangler()({symbol for _, stack in raw for symbol, _ in stack})
    stacks = []
    leaves, threads = collections.Counter(), collections.Counter()
    for comm, stack in raw:
        frames = [(thread(comm), "other")] + [(names[symbol], kind(symbol, dso)) for symbol, dso in reversed(stack)]
        stacks.append(frames)
        threads[thread(comm)] += 1
        leaves[frames[-1][0]] += 1
    total = len(stacks)
    subtitle = f"{total} samples"
    if args.microseconds:
        subtitle += f"; the whole graph is {args.microseconds:.2f} µs of the node's CPU a registration"
    with open(args.svg, "w") as svg:
        svg.write(draw(tree(stacks), args.title, subtitle, args.microseconds, args.min_share))

    def line(name, count):
        share = count / max(1, total)
        us = f"  {share * args.microseconds:6.3f} µs" if args.microseconds else ""
        return f"{share * 100:6.2f}%{us}  {name}"

    print(f"{total} samples")
    print("threads:")
    for name, count in threads.most_common(8):
        print(line(name, count))
    print("top of stack:")
    for name, count in leaves.most_common(25):
        print(line(name[:110], count))


if __name__ == "__main__":
    main()
