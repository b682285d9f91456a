#!/usr/bin/env bash
# The checker's self-test: check.sh on traces whose verdict is known (good ones load with
# the expected counts, broken ones are caught), and a cache whose file does not match its
# pin refused with exit 2. Needs what check.sh needs, plus python3 and gzip. Prints one line
# per case and 'N passed, N failed'; exits non-zero when any case failed.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)

# Fetch (or verify) first, so that a setup problem is reported once, as such.
ui=$("$here/setup.sh") || { echo "selftest: setup.sh failed" >&2; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 "$here/make_fixtures.py" "$work" || exit 2

passed=0
failed=0
# expect NAME WANT_RC WANT_SUBSTRING CHECK_ARGS...
expect() {
  local name=$1 want_rc=$2 want=$3 out rc
  shift 3
  out=$("$here/check.sh" "$@" 2>&1)
  rc=$?
  if [ "$rc" = "$want_rc" ] && [[ "$out" == *"$want"* ]]; then
    passed=$((passed + 1))
    echo "ok   $name"
  else
    failed=$((failed + 1))
    echo "FAIL $name: exit $rc (want $want_rc), output lacks '$want':"
    echo "     $out"
  fi
}

# PyTorch 2.15's own trace of a small CPU run, kept with the trace crate's test data.
pytorch="$repo/crates/test-support/data/pytorch-2.15-cpu-trace.json"
pytorch_counts='{"slices":61,"counters":0,"flows":0,"threads":7,"processes":5,"errors":[]}'
expect "PyTorch trace" 0 "$pytorch_counts" "$pytorch"
gzip -c "$pytorch" >"$work/pytorch.json.gz"
expect "PyTorch trace, gzip" 0 "$pytorch_counts" "$work/pytorch.json.gz"
head -c 10000 "$pytorch" >"$work/pytorch-cut.json"
expect "PyTorch trace cut short" 1 'JSON trace file is incomplete' "$work/pytorch-cut.json"
expect "--verbose" 0 '"trace_processor_version":"Perfetto v52.0' --verbose "$pytorch"

expect "JSON slices, counters, flow" 0 \
  '{"slices":2,"counters":2,"flows":1,"threads":3,"processes":2,"errors":[]}' "$work/events.json"
expect "JSON overlapping X events" 1 \
  '{"name":"slice_drop_overlapping_complete_event","value":1,"severity":"error"}' "$work/overlap.json"
expect "not a trace" 1 'Unknown trace type' "$work/not-a-trace.txt"
expect "empty file" 1 'checker_empty_file' "$work/empty.json"
expect "pftrace" 0 \
  '{"slices":3,"counters":2,"flows":1,"threads":3,"processes":2,"errors":[]}' "$work/tiny.pftrace"
expect "pftrace cut short" 1 'checker_truncated_proto_packet' "$work/tiny-cut.pftrace"
expect "missing file" 2 'no such file' "$work/absent.json"
expect "two files" 2 'usage' "$work/events.json" "$work/overlap.json"

# A cached file that is not what was pinned is never run.
tampered="$work/cache/$(basename "$ui")"
mkdir -p "$tampered"
cp "$ui/engine_bundle.js" "$ui/trace_processor.wasm" "$tampered/"
printf '\0' >>"$tampered/trace_processor.wasm"
OMNIPROF_PERFETTO_CHECK_HOME="$work/cache" \
  expect "tampered cache" 2 "sha256 mismatch for $tampered/trace_processor.wasm" "$work/events.json"

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
