#!/usr/bin/env bash
# Fails when a built cpushield binary contains the test-only kernel
# emulation (src/sys/fixture.rs, the `fixture` feature): its marker file
# name, its crash-injection variable, or code from its source file.
# Usage: tests/shipped-binary-has-no-fixture.sh BINARY
set -euo pipefail
bin=${1:?usage: $0 BINARY}
[ -f "$bin" ] || { echo "no binary at $bin" >&2; exit 2; }
found=0
for needle in .cpushield-fixture CPUSHIELD_FIXTURE_CRASH_AFTER sys/fixture.rs; do
    if grep -qaF -- "$needle" "$bin"; then
        echo "FAIL: $bin contains '$needle' (test-only fixture code in a shipped build)" >&2
        found=1
    fi
done
[ "$found" = 0 ] || exit 1
echo "ok: $bin has no fixture marker, crash variable or fixture code"
