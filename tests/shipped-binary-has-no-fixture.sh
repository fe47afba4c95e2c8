#!/usr/bin/env bash
# Fails when a built cpushield binary contains the test-only kernel
# emulation (src/sys/fixture/, the `fixture` feature): its marker file
# name, its crash-injection variable, or code from its source file), or
# accepts a test hook: --root (another root than /) or --no-rt. Only the
# argument parser runs: both are refused before anything is read.
# Usage: tests/shipped-binary-has-no-fixture.sh BINARY
set -euo pipefail
bin=${1:?usage: $0 BINARY}
[ -f "$bin" ] || { echo "no binary at $bin" >&2; exit 2; }
found=0
for needle in .cpushield-fixture CPUSHIELD_FIXTURE_CRASH_AFTER sys/fixture/; do
    if grep -qaF -- "$needle" "$bin"; then
        echo "FAIL: $bin contains '$needle' (test-only fixture code in a shipped build)" >&2
        found=1
    fi
done
# Each would fail anyway if accepted (no such root; a bad duration), so a
# binary that has the hooks is caught without running anything.
for hook in "--root /nonexistent status" "measure --no-rt --cpus 0 --duration bogus"; do
    flag=$(grep -o -- '--[a-z-]*' <<<"$hook" | head -n1)
    # shellcheck disable=SC2086 # the words of $hook are the arguments
    if out=$("$bin" $hook 2>&1); then
        echo "FAIL: $bin accepts the test hook $flag ('$hook' exits 0)" >&2
        found=1
    elif ! grep -qF -- "unexpected argument '$flag'" <<<"$out"; then
        echo "FAIL: $bin does not refuse $flag as unknown ('$hook'): $out" >&2
        found=1
    fi
done
[ "$found" = 0 ] || exit 1
echo "ok: $bin has no fixture marker, crash variable or fixture code, and refuses --root and --no-rt"
