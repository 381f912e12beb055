#!/usr/bin/env bash
# Runs kv_events_subscriber_test.py in a venv of its own with pyzmq, msgpack and msgspec
# from PyPI (made once, kept in ${XDG_CACHE_HOME:-~/.cache}/troupe/venv-kv-events).
#   tests/apps/kv_events/run_kv_events_test.sh TROUPE_BIN MODEL.gguf
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
venv=${TROUPE_KV_EVENTS_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/troupe/venv-kv-events}
if ! "$venv/bin/python" -c 'import zmq, msgpack, msgspec' 2>/dev/null; then
  python3 -m venv "$venv" || { echo "run_kv_events_test: cannot make a venv at $venv (python3-venv?)" >&2; exit 1; }
  for attempt in 1 2 3; do  # PyPI can hiccup
    "$venv/bin/pip" install -q pyzmq msgpack msgspec && break
    echo "run_kv_events_test: pip install failed (attempt $attempt)" >&2
    sleep 5
  done
  "$venv/bin/python" -c 'import zmq, msgpack, msgspec' ||
    { echo "run_kv_events_test: pyzmq, msgpack and msgspec are needed from PyPI" >&2; exit 1; }
fi
exec "$venv/bin/python" "$here/kv_events_subscriber_test.py" "$@"
