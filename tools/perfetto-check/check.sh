#!/usr/bin/env bash
# Usage: check.sh [--verbose] TRACE_FILE
# Loads TRACE_FILE (Chrome JSON, the same gzip-compressed, or a .pftrace) into Perfetto's
# trace processor, offline, and prints one JSON line:
#   {"slices":N,"counters":N,"flows":N,"threads":N,"processes":N,"errors":[...]}
# Exit 0: loaded, no errors. 1: errors (the trace was refused, or Perfetto recorded error or
# data-loss stats). 2: a usage or setup problem (nothing was checked). 3: the checker or the
# trace processor crashed. The first run fetches the trace processor (setup.sh).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

traces=0
for arg in "$@"; do
  case "$arg" in
    --verbose) ;;
    -*) echo "perfetto-check: unknown option $arg" >&2; exit 2 ;;
    *)
      traces=$((traces + 1))
      [ -f "$arg" ] || { echo "perfetto-check: no such file: $arg" >&2; exit 2; }
      ;;
  esac
done
[ "$traces" = 1 ] || { echo "usage: $0 [--verbose] TRACE_FILE" >&2; exit 2; }

# Exits 2 itself, saying why, when the files cannot be had or do not match their pins.
OMNIPROF_PERFETTO_UI_DIR=$("$here/setup.sh")
export OMNIPROF_PERFETTO_UI_DIR
exec node "$here/load.js" "$@"
