#!/usr/bin/env bash
# Builds target/rpm/cpushield-VERSION-RELEASE.x86_64.rpm: the same tree as
# the .deb (packaging/stage-tree.sh: static binary, systemd units, man
# pages, shell completions, example config), with zsh completions in
# Fedora's site-functions, and the scriptlets in packaging/rpm/, then
# prints the path of the .rpm.
#
#   packaging/build-rpm.sh
#
# Environment: RPM_RELEASE (default 1), RPM_PACKAGER ("Name <mail>"),
# SOURCE_DATE_EPOCH (default: the last commit's time; makes the .rpm
# reproducible), DEB_NOSTRIP=1 (ship the binary with its debug info).
# CPUSHIELD_BIN and CPUSHIELD_ASSETS package a binary and an assets
# directory built elsewhere, as for build-deb.sh; CPUSHIELD_PACKAGE_RPM
# names a built package-rpm (tools/) instead of building it here.
#
# Why the rpm crate (tools/src/bin/package-rpm.rs) and not rpmbuild or
# cargo-generate-rpm: rpmbuild wants a spec file and a build root of its
# own, and would stage the tree a second way; cargo-generate-rpm (built on
# the same crate) would have to be compiled from crates.io on every fresh
# CI machine. package-rpm packs the tree staged here, with the dependencies
# CI compiles anyway.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
cd "$root"

die() { echo "build-rpm: $*" >&2; exit 1; }
for tool in cargo gzip; do
    command -v "$tool" >/dev/null || die "$tool is missing"
done

# The version, commit, SOURCE_DATE_EPOCH, and the tree it shares with the
# .deb.
# shellcheck source=packaging/stage-tree.sh
. "$here/stage-tree.sh"
release=${RPM_RELEASE:-1}
packager=${RPM_PACKAGER:-cpushield maintainers <cpushield@localhost>}

out="$target_dir/rpm"
stage="$out/cpushield-$version-$release.x86_64"
rpm="$out/cpushield-$version-$release.x86_64.rpm"
mkdir -p "$out"

# 1. The static binary, and the man pages and completions from
#    package-assets (tools/).
stage_inputs "$out"

# 2. The tree as installed (packaging/stage-tree.sh); the changelog is the
#    RPM header's.
stage_tree rpm "$stage" "$out"
find "$stage" -newermt "@$SOURCE_DATE_EPOCH" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +

# 3. The package, by tools/src/bin/package-rpm.rs (same target and
#    RUSTFLAGS as package-assets, so the dependencies are shared).
rm -f "$rpm"
args=("$stage" "$out" --source-date "$SOURCE_DATE_EPOCH" --commit "$commit"
    --release "$release" --packager "$packager")
if [[ -n ${CPUSHIELD_PACKAGE_RPM:-} ]]; then
    written=$("$CPUSHIELD_PACKAGE_RPM" "${args[@]}")
else
    written=$(RUSTFLAGS='-C target-feature=+crt-static' \
        cargo run --quiet --release --locked --target "$triple" -p cpushield-tools --bin package-rpm -- "${args[@]}")
fi
[[ $written == "$rpm" && -f $rpm ]] || die "package-rpm wrote '$written', not $rpm"
if command -v rpm >/dev/null; then
    rpm -qpi "$rpm" >&2
    rpm -qplv "$rpm" >&2
fi
echo "$rpm"
