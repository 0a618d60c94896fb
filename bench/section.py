"""Puts one section of BENCHMARKS.md in place, for the benchmarks that write their own section
(make bench-security, make bench-feed) rather than through make bench's renderer.

The section is the text between `<!-- NAME:begin -->` and `<!-- NAME:end -->`: replaced when the
file has it, else inserted before the comparison with the previous revision, else appended.

As a program: `python3 bench/section.py NAME FILE` puts FILE's text in as section NAME.
"""
import re
import sys


def put(name: str, body: str, path: str = "BENCHMARKS.md") -> str:
    """Writes `body` (without markers) as section `name` of `path`; returns the marked section."""
    section = f"<!-- {name}:begin -->\n{body.rstrip()}\n<!-- {name}:end -->\n"
    text = open(path).read()
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    if begin in text:
        text = re.sub(re.escape(begin) + r".*?" + re.escape(end) + r"\n", lambda _: section, text, flags=re.S)
    else:
        marker = "<!-- compare:begin -->"
        text = text.replace(marker, section + "\n" + marker, 1) if marker in text else text + "\n" + section
    open(path, "w").write(text)
    return section


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: section.py NAME FILE")
    put(sys.argv[1], open(sys.argv[2]).read())
