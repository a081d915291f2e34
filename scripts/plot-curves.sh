#!/usr/bin/env bash
# Draws the scaling curves (scripts/plot-curves.py) with a Python that has matplotlib, installing it when none
# does: from PyPI with pip when this Python has pip, else Debian's python3-matplotlib (with sudo when not root).
#
#   scripts/plot-curves.sh CURVES.json OUTPUT-DIRECTORY
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
has_matplotlib() { "$1" -c 'import matplotlib' >/dev/null 2>&1; }
python=""
for candidate in python3 /usr/bin/python3; do
    if command -v "$candidate" >/dev/null 2>&1 && has_matplotlib "$candidate"; then
        python=$candidate
        break
    fi
done
if [ -z "$python" ]; then
    if command -v python3 >/dev/null 2>&1 && python3 -m pip --version >/dev/null 2>&1; then
        echo "plot-curves: installing matplotlib from PyPI (python3 -m pip install matplotlib)" >&2
        python3 -m pip install --quiet matplotlib >&2
        python=python3
    else
        echo "plot-curves: installing python3-matplotlib (apt-get)" >&2
        sudo=()
        [ "$(id -u)" -eq 0 ] || sudo=(sudo)
        "${sudo[@]}" apt-get install -y -q python3-matplotlib >&2
        python=/usr/bin/python3
    fi
fi
exec "$python" "$root/scripts/plot-curves.py" "$@"
