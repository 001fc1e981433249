#!/usr/bin/env bash
# Build the wheel from the committed tree (node builds the panel), install it with its notebook and
# JupyterLab extra into a fresh venv whose PATH has no node (the lock's versions, as `pip install
# 'nbtoolkit-finetune[lab]'` gives), and check JupyterLab lists the prebuilt panel, the server
# extension is enabled, and `%load_ext nbtoolkit` adds the magics.
#   tools/check_wheel_without_node.sh        (on demand, after `make install`: about 2 minutes; not part of make test)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/src"
git -C "$repo" archive HEAD | tar -x -C "$work/src"
"$repo/.venv/bin/python" -m pip wheel -q --no-deps -w "$work/dist" "$work/src"
wheel=$(ls "$work"/dist/nbtoolkit_finetune-*.whl)
unzip -l "$wheel" | grep -E "share/jupyter/labextensions/nbtoolkit/(package.json|static/remoteEntry)|jupyter_server_config.d/nbtoolkit.json"

python3 -m venv "$work/venv"
# (the certificates a proxy may need are kept)
nonode() { env -i HOME="$HOME" PATH="$work/venv/bin" ${SSL_CERT_FILE:+SSL_CERT_FILE="$SSL_CERT_FILE"} "$@"; }
if nonode sh -c 'command -v node' 2>/dev/null; then echo "node is still on PATH" >&2; exit 1; fi
torch_wheels=$(make -s -C "$repo" --eval 'print-torch-wheels: ; @echo $(TORCH_WHEELS)' print-torch-wheels)
nonode "$repo/.venv/bin/uv" pip install -q --python "$work/venv/bin/python" --find-links "$torch_wheels" \
    -c "$repo/requirements.lock" "$wheel[lab]"
plain() { sed 's/\x1b\[[0-9;]*m//g'; }  # without colour codes
labext=$(nonode jupyter labextension list 2>&1 | plain)
server=$(nonode jupyter server extension list 2>&1 | plain)
magics=$(nonode ipython -c "get_ipython().run_line_magic('load_ext', 'nbtoolkit'); \
print(*sorted(name for kind in ('line', 'cell') for name in get_ipython().magics_manager.magics[kind] if name in ('finetune', 'jobs', 'job')))")
echo "$labext" | grep nbtoolkit
echo "$server" | grep -A1 "nbtoolkit.server"
echo "magics: $magics"
echo "$labext" | grep -q "nbtoolkit v[0-9.]* enabled OK (python, nbtoolkit-finetune)"
echo "$server" | grep -q "nbtoolkit.server enabled"
[ "$magics" = "finetune finetune job jobs" ]
echo "the wheel installed without node shows the nbtoolkit panel, the server extension enabled, and the magics"
