#!/usr/bin/env bash
# Runs the .rpm's scriptlets, as the package holds them, against a scratch
# root instead of / (their /run, /var/lib and /usr/sbin/cpushield paths are
# rewritten into it), with RPM's $1 for install, upgrade and erase, under
# dash and bash (Fedora's /bin/sh), and checks that they change nothing
# but what packaging/README-packaging.md says:
#
#   packaging/rpm/test-scriptlets.sh RPM
#
# Nothing outside a temporary directory is read or written; no shield is
# needed or touched. Needs rpm (to read the package's scriptlets).
set -euo pipefail

[[ $# == 1 ]] || { echo "usage: $0 RPM" >&2; exit 2; }
pkg=$1
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
failed=0 passed=0

script() { # TAG: the scriptlet, rewritten to run under $scratch/root
    rpm -qp --qf "%{$1}" "$pkg" | sed -e "s#/run/#$scratch/root/run/#g" \
        -e "s#/var/lib/#$scratch/root/var/lib/#g" \
        -e "s#/usr/sbin/cpushield#$scratch/root/usr/sbin/cpushield#g"
}
for tag in POSTIN PREUN POSTUN; do
    script $tag >"$scratch/$tag"
    grep -q 'set -e' "$scratch/$tag" || { echo "the package has no %$tag scriptlet" >&2; exit 1; }
done

# A fresh root: the installed binary (a stand-in whose --version works
# unless NOEXEC is set, as a copy on a noexec /run fails) and whatever
# the scenario adds.
fresh() {
    rm -rf "$scratch/root"
    mkdir -p "$scratch/root/usr/sbin" "$scratch/root/run" "$scratch/root/var/lib"
    printf '#!/bin/sh\n[ -z "$NOEXEC" ] || exit 126\necho cpushield 0.0\n' \
        >"$scratch/root/usr/sbin/cpushield"
    chmod 0755 "$scratch/root/usr/sbin/cpushield"
}
tree() { (cd "$scratch/root" && find . | sort); }
run() { # SHELL TAG ARG: runs one scriptlet, its output in $scratch/out
    "$1" "$scratch/$2" "$3" >"$scratch/out" 2>&1
}
check() { # WHAT COMMAND...
    local what=$1
    shift
    if "$@"; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        echo "FAIL ($sh): $what" >&2
        sed 's/^/    /' "$scratch/out" >&2
    fi
}
says() { grep -q -- "$1" "$scratch/out"; }

for sh in dash bash; do
    command -v "$sh" >/dev/null || continue

    fresh; before=$(tree)
    run "$sh" POSTIN 1
    check "install (%post 1) says what to do and changes nothing" \
        eval 'says "installed; nothing was started or changed" && [ "$(tree)" = "$before" ]'

    fresh; mkdir -p "$scratch/root/run/systemd/system"; before=$(tree)
    run "$sh" POSTIN 2
    check "upgrade (%post 2) changes nothing" \
        eval 'says "upgraded; the shield (if any) is unchanged" && [ "$(tree)" = "$before" ]'

    fresh; mkdir -p "$scratch/root/run/cpushield/journal" "$scratch/root/var/lib/cpushield"
    echo '{}' >"$scratch/root/var/lib/cpushield/boot.json"; before=$(tree)
    run "$sh" PREUN 1
    check "upgrade (%preun 1) with a shield changes nothing" eval '[ "$(tree)" = "$before" ]'
    run "$sh" POSTUN 1
    check "upgrade (%postun 1) changes nothing" eval '[ "$(tree)" = "$before" ]'

    fresh; before=$(tree)
    run "$sh" PREUN 0
    check "erase (%preun 0) without a shield changes nothing" eval '[ "$(tree)" = "$before" ]'
    mkdir -p "$scratch/root/var/lib/prometheus/node-exporter" "$scratch/root/var/lib/cpushield"
    touch "$scratch/root/var/lib/prometheus/node-exporter/cpushield.prom"
    cp "$scratch/root/usr/sbin/cpushield" "$scratch/root/var/lib/cpushield/cpushield-off"
    run "$sh" POSTUN 0
    check "erase (%postun 0) deletes the metrics and a copy nothing needs" \
        eval '[ ! -e "$scratch/root/var/lib/prometheus/node-exporter/cpushield.prom" ] && [ ! -e "$scratch/root/var/lib/cpushield" ]'

    # Fedora-like: node_exporter's textfile directory in the upstream layout
    fresh; fedora=var/lib/node_exporter/textfile_collector
    mkdir -p "$scratch/root/$fedora"; touch "$scratch/root/$fedora/cpushield.prom"; before=$(tree)
    run "$sh" POSTUN 1
    check "upgrade (%postun 1) keeps the metrics in node_exporter's upstream directory" eval '[ "$(tree)" = "$before" ]'
    run "$sh" POSTUN 0
    check "erase (%postun 0) deletes the metrics in node_exporter's upstream directory, and only them" \
        eval '[ ! -e "$scratch/root/$fedora/cpushield.prom" ] && [ -d "$scratch/root/$fedora" ]'

    fresh; mkdir -p "$scratch/root/run/cpushield/journal"
    run "$sh" PREUN 0
    check "erase with a shield keeps a copy in /run and says how to run off" \
        eval 'cmp -s "$scratch/root/usr/sbin/cpushield" "$scratch/root/run/cpushield/cpushield-off" && says "run/cpushield/cpushield-off off" && [ ! -e "$scratch/root/var/lib/cpushield" ]'

    fresh; mkdir -p "$scratch/root/run/cpushield/journal"
    NOEXEC=1 run "$sh" PREUN 0
    check "erase with a shield and a noexec /run keeps the copy in /var/lib" \
        eval '[ -x "$scratch/root/var/lib/cpushield/cpushield-off" ] && [ ! -e "$scratch/root/run/cpushield/cpushield-off" ] && says "var/lib/cpushield/cpushield-off off"'
    run "$sh" POSTUN 0
    check "erase (%postun 0) keeps the copy a shield needs" eval '[ -x "$scratch/root/var/lib/cpushield/cpushield-off" ]'

    fresh; mkdir -p "$scratch/root/var/lib/cpushield"
    echo '{}' >"$scratch/root/var/lib/cpushield/boot.json"
    run "$sh" PREUN 0
    check "erase with the boot half keeps a copy and says how to take it out" \
        eval '[ -x "$scratch/root/var/lib/cpushield/cpushield-off" ] && says "cpushield-off boot --remove"'
    run "$sh" POSTUN 0
    check "erase (%postun 0) leaves the boot half and its copy" \
        eval '[ -f "$scratch/root/var/lib/cpushield/boot.json" ] && [ -x "$scratch/root/var/lib/cpushield/cpushield-off" ]'
done

echo "scriptlets: $passed passed, $failed failed"
[[ $failed == 0 ]]
