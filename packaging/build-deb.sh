#!/usr/bin/env bash
# Builds target/debian/cpushield_VERSION_amd64.deb: the static binary, its
# systemd units, man pages, shell completions, an example config and the
# maintainer scripts, then prints the path of the .deb.
#
#   packaging/build-deb.sh
#
# Environment: DEB_REVISION (default 1), DEB_MAINTAINER ("Name <mail>"),
# SOURCE_DATE_EPOCH (default: the last commit's time; makes the .deb
# reproducible), DEB_NOSTRIP=1 (ship the binary with its debug info).
# CPUSHIELD_BIN and CPUSHIELD_ASSETS package a binary and an assets
# directory built elsewhere instead of building them here.
#
# Why dpkg-deb and not cargo-deb: dpkg-deb comes with dpkg on every Debian
# system, while cargo-deb is not packaged for Debian 12 and would have to be
# compiled from crates.io on every fresh CI machine, for what is a short
# staging step here. The layout follows Debian policy by hand instead.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
cd "$root"

die() { echo "build-deb: $*" >&2; exit 1; }
for tool in cargo dpkg-deb gzip md5sum; do
    command -v "$tool" >/dev/null || die "$tool is missing"
done

triple=x86_64-unknown-linux-gnu
target_dir=${CARGO_TARGET_DIR:-$root/target}
version=$(sed -n '/^\[package\]/,/^\[/s/^version *= *"\([^"]*\)".*/\1/p' Cargo.toml | head -n1)
[[ -n $version ]] || die "no version in Cargo.toml's [package]"
debversion="$version-${DEB_REVISION:-1}"
maintainer=${DEB_MAINTAINER:-cpushield maintainers <cpushield@localhost>}
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}

out="$target_dir/debian"
stage="$out/cpushield_${debversion}_amd64"
deb="$out/cpushield_${debversion}_amd64.deb"
mkdir -p "$out"

# 1. The static binary, and the man pages and completions from the assets
#    example. Same target and RUSTFLAGS for both, so the dependencies are
#    compiled once.
if [[ -n ${CPUSHIELD_BIN:-} ]]; then
    bin=$CPUSHIELD_BIN
else
    export RUSTFLAGS='-C target-feature=+crt-static'
    cargo build --release --locked --target "$triple"
    bin="$target_dir/$triple/release/cpushield"
fi
if [[ -n ${CPUSHIELD_ASSETS:-} ]]; then
    assets=$CPUSHIELD_ASSETS
else
    assets="$out/assets"
    rm -rf "$assets"
    RUSTFLAGS='-C target-feature=+crt-static' \
        cargo run --release --locked --target "$triple" --example package-assets -- "$assets"
fi
[[ -x $bin ]] || die "no binary at $bin"
# Depends: stays empty only while the binary needs no shared library.
if command -v readelf >/dev/null && readelf -d "$bin" 2>/dev/null | grep -q '(NEEDED)'; then
    die "$bin is dynamically linked; build it with RUSTFLAGS='-C target-feature=+crt-static'"
fi

# 2. The tree as installed. Unit files go to /usr/lib/systemd/system: systemd
#    on Debian 12 searches it as well as /lib/systemd/system, and Debian 13
#    uses only /usr (files under /lib are discouraged since the /usr merge).
rm -rf "$stage"
umask 022
install -D -m 0755 "$bin" "$stage/usr/sbin/cpushield"
if [[ -z ${DEB_NOSTRIP:-} ]] && command -v objcopy >/dev/null; then
    # As dh_strip does: the debug info goes to a file beside the .deb, the
    # shipped binary keeps only a link to it.
    objcopy --only-keep-debug "$bin" "$out/cpushield.debug"
    objcopy --strip-debug --strip-unneeded --add-gnu-debuglink="$out/cpushield.debug" \
        "$stage/usr/sbin/cpushield"
fi
for unit in cpushield.service cpushield-metrics.service cpushield-metrics.timer; do
    install -D -m 0644 "$here/$unit" "$stage/usr/lib/systemd/system/$unit"
done

shopt -s nullglob
mans=("$assets"/man/*.1)
(( ${#mans[@]} )) || die "no man pages in $assets/man"
mkdir -p "$stage/usr/share/man/man1"
for page in "${mans[@]}"; do
    gzip -9n <"$page" >"$stage/usr/share/man/man1/$(basename "$page").gz"
done
install -D -m 0644 "$assets/completions/cpushield.bash" \
    "$stage/usr/share/bash-completion/completions/cpushield"
install -D -m 0644 "$assets/completions/_cpushield" \
    "$stage/usr/share/zsh/vendor-completions/_cpushield"
install -D -m 0644 "$assets/completions/cpushield.fish" \
    "$stage/usr/share/fish/vendor_completions.d/cpushield.fish"

# Only an example: nothing is installed under /etc, so nothing is applied
# before the administrator writes /etc/cpushield/cpushield.toml.
doc="$stage/usr/share/doc/cpushield"
install -D -m 0644 "$here/cpushield.toml" "$doc/examples/cpushield.toml"
# The copyright file lists the crates linked into the binary (normal
# dependencies only: build scripts and dev-dependencies are not shipped).
cargo tree --locked -e normal --target "$triple" --prefix none --format '{p}: {l}' \
    | sed -e 's/ (\*)$//' | grep -v '^cpushield v' | sort -u >"$out/crates.txt"
[[ -s $out/crates.txt ]] || die "cargo tree listed no crates"
awk 'NR == FNR { crate[++n] = $0; next }
     $0 == " @CRATES@" { for (i = 1; i <= n; i++) print " " crate[i]; next }
     { print }' "$out/crates.txt" "$here/debian/copyright" >"$doc/copyright"
chmod 0644 "$doc/copyright"
cat <<EOF | gzip -9n >"$doc/changelog.Debian.gz"
cpushield ($debversion) unstable; urgency=medium

  * Built from commit $commit.

 -- $maintainer  $(date -u -R -d "@$SOURCE_DATE_EPOCH")
EOF

# 3. Control files.
installed_size=$(du -sk "$stage" | cut -f1)
mkdir -m 0755 "$stage/DEBIAN"
# No Depends: the binary is static. The units use systemctl and busctl,
# which every systemd host has, and are inert without systemd.
cat >"$stage/DEBIAN/control" <<EOF
Package: cpushield
Version: $debversion
Architecture: amd64
Maintainer: $maintainer
Installed-Size: $installed_size
Section: admin
Priority: optional
Suggests: prometheus-node-exporter, stress-ng
Description: shield CPUs for real-time work, undo it exactly, prove it
 cpushield moves every other process, kernel thread, interrupt and unbound
 workqueue off chosen CPUs and has the kernel keep them off (a cgroup
 cpuset partition), journals every change so "cpushield off" restores the
 machine exactly, and measures latency shielded and unshielded under load.
 .
 The package changes nothing when installed or removed: the shield is
 applied by cpushield.service once it is enabled and configured in
 /etc/cpushield/cpushield.toml.
EOF
if [[ -d $stage/etc ]]; then
    (cd "$stage" && find etc -type f -printf '/%p\n' | sort) >"$stage/DEBIAN/conffiles"
fi
for script in postinst prerm postrm; do
    install -m 0755 "$here/debian/$script" "$stage/DEBIAN/$script"
done
(cd "$stage" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z \
    | xargs -0 md5sum) >"$stage/DEBIAN/md5sums"
chmod 0644 "$stage/DEBIAN/md5sums"

# 4. The archive, with every timestamp clamped for reproducibility.
find "$stage" -newermt "@$SOURCE_DATE_EPOCH" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
rm -f "$deb"
dpkg-deb --root-owner-group --build "$stage" "$deb" >&2
dpkg-deb --info "$deb" >&2
dpkg-deb --contents "$deb" >&2
if command -v lintian >/dev/null; then
    lintian --info "$deb" >&2 || echo "build-deb: lintian reported the findings above" >&2
fi
echo "$deb"
