#!/usr/bin/env bash
# Rewrites the settings tables of README.md and docs/operations.md from the settings' one
# declaration (NodeSetting.all), through registryd's hidden --settings-markdown. A table sits
# between "<!-- settings:begin NAMES -->" and "<!-- settings:end -->", NAMES being "all" or
# the flags it lists, comma-separated. SettingsDocsTests fails while a table is stale.
set -euo pipefail
registryd="$1"
for file in README.md docs/operations.md; do
  python3 - "$registryd" "$file" <<'PY'
import re, subprocess, sys
registryd, path = sys.argv[1], sys.argv[2]
text = open(path).read()
def table(match):
    names = match.group(1)
    body = subprocess.check_output([registryd, "--settings-markdown", names], text=True)
    return f"<!-- settings:begin {names} -->\n{body}<!-- settings:end -->"
new = re.sub(r"<!-- settings:begin (\S+) -->\n.*?<!-- settings:end -->", table, text, flags=re.S)
if new != text:
    open(path, "w").write(new)
    print(f"rewrote the settings tables of {path}")
PY
done
