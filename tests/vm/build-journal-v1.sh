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
# Built once: its commit never changes (ci.sh --build-only made it already).
if [ -x "$DIR/cpushield-journal-v1" ]; then echo "$DIR/cpushield-journal-v1"; exit 0; fi
if ! git cat-file -e "$COMMIT^{commit}" 2>/dev/null; then
    # A shallow clone: ask its origin for that commit.
    git fetch --quiet origin "$COMMIT" 2>/dev/null || git fetch --quiet --unshallow 2>/dev/null || true
fi
git cat-file -e "$COMMIT^{commit}" 2>/dev/null \
    || { echo "build-journal-v1: commit $COMMIT is not in this clone, nor could it be fetched (a shallow clone without its origin?)" >&2; exit 1; }
SRC=$(mktemp -d)
trap 'rm -rf "$SRC"' EXIT
git archive "$COMMIT" | tar -x -C "$SRC"
# Built in the current target directory, so the dependencies it shares
# with the current build (same versions, target and RUSTFLAGS) are compiled
# once. Its package is renamed (the library keeps its crate name, cpushield)
# so that cargo tells it from the current one, and its binary is
# cpushield-journal-v1 (the package's name), so that it never takes the
# current one's place;
# its dev-dependencies and benches, which name the old package, go.
awk '
    /^\[/ { skip = ($0 == "[dev-dependencies]" || $0 == "[[bench]]" || $0 == "[[example]]" || $0 == "[[test]]") }
    skip { next }
    /^name = "cpushield"$/ && !named { print "name = \"cpushield-journal-v1\""; named = 1; next }
    /^default-run/ { next }
    { print }
    END { print "\n[lib]\nname = \"cpushield\"\npath = \"src/lib.rs\"" }
' "$SRC/Cargo.toml" >"$SRC/Cargo.toml.new"
mv "$SRC/Cargo.toml.new" "$SRC/Cargo.toml"
mkdir -p "${CARGO_TARGET_DIR:-target}"
TARGET=$(cd "${CARGO_TARGET_DIR:-target}" && pwd)
(cd "$SRC" && RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static" CARGO_TARGET_DIR="$TARGET" \
    cargo build --quiet --release --target x86_64-unknown-linux-gnu --bin cpushield-journal-v1)
mkdir -p "$DIR"
cp "$TARGET/x86_64-unknown-linux-gnu/release/cpushield-journal-v1" "$DIR/cpushield-journal-v1"
echo "$DIR/cpushield-journal-v1"
