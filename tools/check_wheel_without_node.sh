#!/usr/bin/env bash
# Build the wheel from the committed tree (node builds the panel), install it into a fresh venv
# whose PATH has no node, and check JupyterLab lists the panel and the server extension enabled.
#   tools/check_wheel_without_node.sh        (on demand: about 2 minutes; not part of make test)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/src"
git -C "$repo" archive HEAD | tar -x -C "$work/src"
"$repo/.venv/bin/python" -m pip wheel -q --no-deps -w "$work/dist" "$work/src"
wheel=$(ls "$work"/dist/nbtoolkit-*.whl)
unzip -l "$wheel" | grep -E "share/jupyter/labextensions/nbtoolkit/(package.json|static/remoteEntry)|jupyter_server_config.d/nbtoolkit.json"

python3 -m venv "$work/venv"
nonode() { env -i HOME="$HOME" PATH="$work/venv/bin" PIP_DISABLE_PIP_VERSION_CHECK=1 "$@"; }
if nonode sh -c 'command -v node' 2>/dev/null; then echo "node is still on PATH" >&2; exit 1; fi
# the panel needs no Python ML stack to be listed: the wheel alone, JupyterLab, and the light core
nonode pip install -q -c "$repo/constraints.txt" jupyterlab pydantic pyyaml psutil platformdirs
nonode pip install -q --no-deps "$wheel"
plain() { sed 's/\x1b\[[0-9;]*m//g'; }  # without colour codes
labext=$(nonode jupyter labextension list 2>&1 | plain)
server=$(nonode jupyter server extension list 2>&1 | plain)
echo "$labext" | grep nbtoolkit
echo "$server" | grep -A1 "nbtoolkit.server"
echo "$labext" | grep -q "nbtoolkit v[0-9.]* enabled OK (python, nbtoolkit)"
echo "$server" | grep -q "nbtoolkit.server enabled"
echo "the wheel installed without node shows the nbtoolkit panel and server extension enabled"
