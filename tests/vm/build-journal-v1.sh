#!/usr/bin/env bash
# Builds the static cpushield of the last commit whose journal is of
# version 1, as DIR/cpushield-journal-v1, for the upgrade scenario
# (26-journal-v1: a shield that binary made, undone by the new one).
# Its source comes from git history (git archive); a shallow clone fetches
# the commit from its origin, and where it cannot, this fails saying so.
#
#   tests/vm/build-journal-v1.sh DIR
set -euo pipefail
cd "$(dirname "$0")/../.."
DIR=${1:?usage: tests/vm/build-journal-v1.sh DIR}
# The commit before journal version 2 (each entry naming its component).
COMMIT=6298661230199f66543d587dc84b8091bebdcb7a
if ! git cat-file -e "$COMMIT^{commit}" 2>/dev/null; then
    # A shallow clone: ask its origin for that commit.
    git fetch --quiet origin "$COMMIT" 2>/dev/null || git fetch --quiet --unshallow 2>/dev/null || true
fi
git cat-file -e "$COMMIT^{commit}" 2>/dev/null \
    || { echo "build-journal-v1: commit $COMMIT is not in this clone, nor could it be fetched (a shallow clone without its origin?)" >&2; exit 1; }
SRC=$(mktemp -d)
trap 'rm -rf "$SRC"' EXIT
git archive "$COMMIT" | tar -x -C "$SRC"
# A target directory of its own: in the current one, cargo takes the old
# source's build for the current one (same crate, same hash) and keeps it.
mkdir -p "${CARGO_TARGET_DIR:-target}/journal-v1"
TARGET=$(cd "${CARGO_TARGET_DIR:-target}/journal-v1" && pwd)
(cd "$SRC" && RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static" CARGO_TARGET_DIR="$TARGET" \
    cargo build --quiet --release --target x86_64-unknown-linux-gnu --bin cpushield)
mkdir -p "$DIR"
cp "$TARGET/x86_64-unknown-linux-gnu/release/cpushield" "$DIR/cpushield-journal-v1"
echo "$DIR/cpushield-journal-v1"
