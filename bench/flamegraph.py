"""Draws a flame graph (SVG) of a profile, for docs/performance.md ("Flame graphs of the two rows").

    perf record -F 1999 -g -p PID -o perf.data -- sleep 8
    perf script -i perf.data -F comm,pid,tid,ip,sym,dso > perf.txt
    python3 bench/flamegraph.py --title TITLE [--pid PID] [--microseconds US] perf.txt out.svg

Each sample's stack is drawn from its thread's name (the root) up to the frame it was in (the
top); a frame's width is its share of the samples. With `--pid`, the samples of other processes
(perf follows the children the node forks, its snapshots) have a root of their own. Swift names
are demangled with `swift-demangle --simplified` when it is on the PATH or in /opt/swift. With
`--microseconds`, the CPU the whole profile stands for, in µs a registration, each frame's
tooltip also gives its share in µs a registration: where each microsecond goes. Frames under
`--min-share` of the samples are left out (their time stays in the frame below them), which
keeps the file small. Prints the threads, and the heaviest frames at the top of a stack and
anywhere in it, as text too.
"""
import argparse
import collections
import html
import os
import re
import shutil
import subprocess
import zlib

from perf_classes import parsed_samples

WIDTH = 1200
FRAME_HEIGHT = 16
FONT_SIZE = 11
CHAR_WIDTH = 6.7  # about what one character of an 11 px monospace font takes
MARGIN_TOP = 40


def split_frame(text):
    """A frame's symbol and dso, from "symbol (dso)": the dso is the last parenthesised group (a
    symbol may hold parentheses and spaces, a dso "(deleted)"); "" when there is none."""
    if not text.endswith(")"):
        return text, ""
    depth = 0
    for index in range(len(text) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(text[index], 0)
        if depth == 0:
            return text[:index].rstrip() or text, text[index + 1 : -1]
    return text, ""


def samples(path, node_pid):
    """Each sample as (root, [(symbol, dso), ...] leaf first), from
    `perf script -F comm,pid,tid,ip,sym,dso`. The root is the thread's name, or, for a process
    other than `node_pid`, the forked child's."""
    for header, stack in parsed_samples(path):
        comm, _, ids = header.rpartition(" ")
        if node_pid and "/" not in ids:
            raise SystemExit("--pid needs perf script's pid field: -F comm,pid,tid,ip,sym,dso")
        pid = ids.split("/")[0]
        if node_pid and pid.isdigit() and int(pid) != node_pid:
            root = f"forked child (pid {pid})"
        else:
            root = thread(comm.strip() or header)
        yield root, [split_frame(frame) for frame in stack]


def demangle(names):
    """Maps mangled Swift names to short ones, by one `swift-demangle` process for all of them;
    other names, and every name when the tool is missing or fails, stay as they are."""
    names = sorted(names)
    tool = shutil.which("swift-demangle") or "/opt/swift/usr/bin/swift-demangle"
    try:
        out = subprocess.run([tool, "--simplified"], input="\n".join(names) + "\n", capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return {name: name for name in names}
    lines = out.split("\n")
    # One line out for each line in: anything else and the names could not be paired.
    if len(lines) != len(names) + 1:
        return {name: name for name in names}
    return {name: short(line) or name for name, line in zip(names, lines)}


def short(name):
    """A demangled name without "specialized ": a specialised copy stands in for its function. (A
    "merged" one keeps the word: the linker folded functions of the same code into it, and its
    name is one of theirs, not necessarily the one called.)"""
    return name[len("specialized ") :] if name.startswith("specialized ") else name


def thread(comm):
    """A thread's name as the root of its frames: Linux keeps 15 characters of it, so libdispatch's
    worker threads (where the commit queue runs) show the end of theirs."""
    if comm.endswith("qos.overcommit") or comm.endswith("default-qos"):
        return f"dispatch worker ({comm})"
    return comm


# This project's modules (Sources/), and its generated protobuf-c code's prefix.
OWN_MODULES = ("Registry", "Platform", "LoadGeneration", "registry", "CRegistryProto")


def swift_module(symbol):
    """The module a mangled Swift symbol belongs to ("$s7NIOCore..." is NIOCore's), or ""."""
    if not symbol.startswith("$s"):
        return ""
    digits = ""
    for character in symbol[2:]:
        if not character.isdigit():
            break
        digits += character
    return symbol[2 + len(digits) : 2 + len(digits) + int(digits)] if digits else ""


def extended_by_own_module(symbol):
    """Whether a mangled symbol is in an extension this project declares on another module's type
    ("$sSS12RegistryCoreE..." is RegistryCore's extension of String): the extending module follows
    the type, as a length and a name, then "E"."""
    for match in re.finditer(r"(?<!\d)\d+", symbol):
        start, length = match.end(), int(match.group())
        name = symbol[start : start + length]
        if symbol[start + length : start + length + 1] == "E" and name.startswith(OWN_MODULES):
            return True
    return False


def kind(symbol, dso):
    """The colour family of a frame: the kernel, the Swift runtime, standard library and C library,
    NIO, this project's code, or another library (swift-crypto's BoringSSL, protobuf-c, ...)."""
    library = os.path.basename(dso)
    if dso.startswith("[kernel"):
        return "kernel"
    if library.startswith(("libswiftCore", "libc.", "ld-linux", "libdispatch", "libswiftDispatch", "[vdso")):
        return "runtime"
    if extended_by_own_module(symbol):
        return "registry"
    module = swift_module(symbol)
    if module.startswith(OWN_MODULES) or symbol.startswith("registry__"):
        return "registry"
    if module.startswith(("NIO", "_NIO")):
        return "nio"
    # The standard library's generic code, specialised into the binary ("$ss...", "$sS...").
    if symbol.startswith(("$ss", "$sS")):
        return "runtime"
    return "library"


PALETTE = {
    "kernel": (230, 140, 60),
    "runtime": (190, 190, 160),
    "nio": (110, 160, 220),
    "registry": (110, 190, 110),
    "library": (190, 140, 210),
    "thread": (170, 170, 170),
}


def colour(name, family):
    """A shade of the family's colour that stays the same for a name from run to run."""
    r, g, b = PALETTE[family]
    shade = zlib.crc32(name.encode()) % 40 - 20
    return f"rgb({max(0, min(255, r + shade))},{max(0, min(255, g + shade))},{max(0, min(255, b + shade))})"


def tree(stacks):
    """The frames as a tree of dicts: each node {'count', 'family', 'children'}, keyed by name."""
    root = {"count": 0, "family": "thread", "children": {}}
    for frames in stacks:
        root["count"] += 1
        node = root
        for name, family in frames:
            child = node["children"].setdefault(name, {"count": 0, "family": family, "children": {}})
            child["count"] += 1
            node = child
    return root


def draw(root, title, subtitle, microseconds, min_share):
    """The SVG of the frame tree `root` (``tree``): roots at the bottom, each frame as wide as its
    share of the samples, those under `min_share` left out."""
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
        '<?xml version="1.0" encoding="UTF-8"?>',
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
    """Reads the profile, writes the SVG, prints the summary."""
    parser = argparse.ArgumentParser(description="Draws a flame graph (SVG) from `perf script -F comm,pid,tid,ip,sym,dso` output.")
    parser.add_argument("--title", required=True)
    parser.add_argument("--pid", type=int, help="the profiled process: other processes' samples are its forked children")
    parser.add_argument("--microseconds", type=float, help="the CPU the whole profile stands for, in µs a registration")
    parser.add_argument("--min-share", type=float, default=0.0005, help="frames under this share of the samples are left out")
    parser.add_argument("perf_script")
    parser.add_argument("svg")
    args = parser.parse_args()

    raw = list(samples(args.perf_script, args.pid))
    names = demangle({symbol for _, stack in raw for symbol, _ in stack})
    stacks = []
    leaves, anywhere, threads = collections.Counter(), collections.Counter(), collections.Counter()
    for root, stack in raw:
        frames = [(root, "thread")] + [(names[symbol], kind(symbol, dso)) for symbol, dso in reversed(stack)]
        stacks.append(frames)
        threads[root] += 1
        leaves[frames[-1][0]] += 1
        # Counted once a sample however many times the frame recurs in it.
        for name in {name for name, _ in frames[1:]}:
            anywhere[name] += 1
    total = len(stacks)
    subtitle = f"{total} samples"
    if args.microseconds:
        subtitle += f"; the whole graph is {args.microseconds:.3f} µs of the node's CPU a registration"
    with open(args.svg, "w", encoding="utf-8") as svg:
        svg.write(draw(tree(stacks), args.title, subtitle, args.microseconds, args.min_share))

    def line(name, count):
        share = count / max(1, total)
        us = f"  {share * args.microseconds:6.3f} µs" if args.microseconds else ""
        return f"{share * 100:6.2f}%{us}  {name[:110]}"

    print(f"{total} samples")
    print("threads:")
    for name, count in threads.most_common(8):
        print(line(name, count))
    print("at the top of a stack (self):")
    for name, count in leaves.most_common(25):
        print(line(name, count))
    print("anywhere in a stack (inclusive):")
    for name, count in anywhere.most_common(120):
        print(line(name, count))


if __name__ == "__main__":
    main()
