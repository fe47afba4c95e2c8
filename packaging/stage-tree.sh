# Sourced by packaging/build-deb.sh and packaging/build-rpm.sh (not run on
# its own): the file tree both packages install, staged once here so that
# the .deb and the .rpm cannot drift apart. The caller has `set -euo
# pipefail` and a die() of its own, and sets `here` (packaging/) and `root`
# (the repository, the working directory).
#
# Sets: triple, target_dir, version (from Cargo.toml), commit, and exports
# SOURCE_DATE_EPOCH (default: the last commit's time).
# stage_inputs OUT: sets bin and assets, building them unless CPUSHIELD_BIN
#   and CPUSHIELD_ASSETS name them (assets built here go to OUT/assets).
# stage_tree deb|rpm STAGE OUT: installs the tree into STAGE; the debug info
#   goes to OUT/cpushield.debug, the crate list to OUT/crates.txt.

triple=x86_64-unknown-linux-gnu
target_dir=${CARGO_TARGET_DIR:-$root/target}
version=$(sed -n '/^\[package\]/,/^\[/s/^version *= *"\([^"]*\)".*/\1/p' Cargo.toml | head -n1)
[[ -n $version ]] || die "no version in Cargo.toml's [package]"
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}

# The static binary, and the man pages and completions from package-assets
# (tools/). Same target and RUSTFLAGS for both, so the dependencies are
# compiled once.
stage_inputs() {
    local out=$1
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
            cargo run --release --locked --target "$triple" -p cpushield-tools --bin package-assets -- "$assets"
    fi
    [[ -x $bin ]] || die "no binary at $bin"
    # No dependencies in either package: only while the binary needs no
    # shared library.
    if command -v readelf >/dev/null && readelf -d "$bin" 2>/dev/null | grep -q '(NEEDED)'; then
        die "$bin is dynamically linked; build it with RUSTFLAGS='-C target-feature=+crt-static'"
    fi
}

# The tree as installed. The two flavours differ only where the
# distributions do: zsh completions go to Debian's vendor-completions or
# Fedora's site-functions (each zsh searches its own only); the copyright
# file goes to /usr/share/doc/cpushield or to Fedora's license directory
# /usr/share/licenses/cpushield (%license), where it points to the Apache
# License's text on the web, not to Debian's /usr/share/common-licenses;
# and the changelog is Debian's changelog.Debian.gz, written by
# build-deb.sh, or the RPM header's own. packaging/compare-deb-rpm.sh
# checks that nothing else differs.
stage_tree() {
    local flavour=$1 stage=$2 out=$3 zsh_dir copyright
    case $flavour in
    deb)
        zsh_dir=usr/share/zsh/vendor-completions
        copyright=usr/share/doc/cpushield/copyright
        ;;
    rpm)
        zsh_dir=usr/share/zsh/site-functions
        copyright=usr/share/licenses/cpushield/copyright
        ;;
    *) die "stage_tree: unknown flavour $flavour" ;;
    esac

    # Unit files go to /usr/lib/systemd/system: systemd on Debian 12
    # searches it as well as /lib/systemd/system, Debian 13 uses only /usr
    # (files under /lib are discouraged since the /usr merge), and it is
    # Fedora's and RHEL's %{_unitdir}.
    rm -rf "$stage"
    umask 022
    install -D -m 0755 "$bin" "$stage/usr/sbin/cpushield"
    if [[ -z ${DEB_NOSTRIP:-} ]] && command -v objcopy >/dev/null; then
        # As dh_strip does: the debug info goes to a file beside the
        # package, the shipped binary keeps only a link to it.
        objcopy --only-keep-debug "$bin" "$out/cpushield.debug"
        objcopy --strip-debug --strip-unneeded --add-gnu-debuglink="$out/cpushield.debug" \
            "$stage/usr/sbin/cpushield"
    fi
    for unit in cpushield.service cpushield-nri.service cpushield-metrics.service cpushield-metrics.timer; do
        install -D -m 0644 "$here/$unit" "$stage/usr/lib/systemd/system/$unit"
    done

    shopt -s nullglob
    mans=("$assets"/man/*.8)
    (( ${#mans[@]} )) || die "no man pages in $assets/man"
    mkdir -p "$stage/usr/share/man/man8"
    for page in "${mans[@]}"; do
        gzip -9n <"$page" >"$stage/usr/share/man/man8/$(basename "$page").gz"
    done
    install -D -m 0644 "$assets/completions/cpushield.bash" \
        "$stage/usr/share/bash-completion/completions/cpushield"
    install -D -m 0644 "$assets/completions/_cpushield" \
        "$stage/$zsh_dir/_cpushield"
    install -D -m 0644 "$assets/completions/cpushield.fish" \
        "$stage/usr/share/fish/vendor_completions.d/cpushield.fish"

    # Only an example: nothing is installed under /etc, so nothing is
    # applied before the administrator writes /etc/cpushield/cpushield.toml.
    doc="$stage/usr/share/doc/cpushield"
    install -D -m 0644 "$here/cpushield.toml" "$doc/examples/cpushield.toml"
    # The copyright file lists the crates linked into the binary (normal
    # dependencies only: build scripts and dev-dependencies are not shipped).
    cargo tree --locked -e normal --target "$triple" --prefix none --format '{p}: {l}' \
        | sed -e 's/ (\*)$//' | grep -v '^cpushield v' | sort -u >"$out/crates.txt"
    [[ -s $out/crates.txt ]] || die "cargo tree listed no crates"
    mkdir -p "$(dirname "$stage/$copyright")"
    awk -v flavour="$flavour" '
         NR == FNR { crate[++n] = $0; next }
         $0 == " @CRATES@" { for (i = 1; i <= n; i++) print " " crate[i]; next }
         flavour == "rpm" && /^ On Debian systems the full text of the Apache License 2.0 is in$/ {
             print " The full text of the Apache License 2.0 is at"; next }
         flavour == "rpm" && $0 == " /usr/share/common-licenses/Apache-2.0." {
             print " https://www.apache.org/licenses/LICENSE-2.0."; next }
         { print }' "$out/crates.txt" "$here/debian/copyright" >"$stage/$copyright"
    chmod 0644 "$stage/$copyright"
    # The licence texts beside it (MIT OR Apache-2.0), as the repository has them.
    for licence in LICENSE-MIT LICENSE-APACHE; do
        install -m 0644 "$here/../$licence" "$(dirname "$stage/$copyright")/$licence"
    done
}
