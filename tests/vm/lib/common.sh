# Shared settings and helpers for the host side of the test bed (sourced).
# shellcheck shell=bash

VM_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
REPO_DIR=$(cd "$VM_DIR/../.." && pwd)
CACHE_DIR=${CPUSHIELD_VM_CACHE:-$VM_DIR/cache}
WORK_DIR=${CPUSHIELD_VM_WORK:-$VM_DIR/work}

log() { printf '[vm] %s\n' "$*" >&2; }
die() { printf '[vm] error: %s\n' "$*" >&2; exit 2; }

need_cmd() {
    local c
    for c in "$@"; do
        command -v "$c" >/dev/null 2>&1 || die "'$c' not found (run tests/vm/ci.sh --install-only, or apt-get install it)"
    done
}
