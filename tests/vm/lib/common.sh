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

# UEFI guests (distro/image.sh --uefi, run.sh boot=sdboot|uki|grub-efi):
# Debian's ovmf package, Secure Boot off (the plain 4 MiB images). The CODE
# image is read-only; VARS is copied for every image and every boot.
# Machine pc: under TCG a disk boot to power-off took 88-95 s on pc and
# 106-111 s on q35 (trixie, systemd-boot, 2 vCPUs, two paired runs on a
# host with a build on its other core: weak evidence);
# CPUSHIELD_UEFI_MACHINE=q35 gives the guest PCI Express (the images work
# on both: their NVRAM entry is a short-form HD() path).
OVMF_CODE=${CPUSHIELD_OVMF_CODE:-/usr/share/OVMF/OVMF_CODE_4M.fd}
OVMF_VARS=${CPUSHIELD_OVMF_VARS:-/usr/share/OVMF/OVMF_VARS_4M.fd}
UEFI_MACHINE=${CPUSHIELD_UEFI_MACHINE:-pc}
# The guests' CPU model: QEMU's plain 64-bit CPU, which the Debian guests
# boot faster under TCG than `max` (every feature TCG emulates: glibc and
# the kernel pick wider code paths, each instruction emulated): Debian 12
# 839 -> 738 s, Debian 13 850 -> 795 s, 7.x 386 -> 344 s in CI's lanes,
# every scenario passing on both. -cx16: without it the 6.12 guest
# corrupted memory in 5 of 6 boots under multi-threaded TCG.
# CPUSHIELD_QEMU_CPU=max,-cx16 gives the former model.
QEMU_CPU=${CPUSHIELD_QEMU_CPU:-qemu64,-cx16}
# go_module_src MODULE VERSION DIR LOG: fetches the Go module with `go mod
# download` (`go install MODULE@VERSION` stops at the proxy's deprecation
# lookup for some modules) and copies its directory out of the read-only
# module cache into DIR/src, writable, to build there with its own go.mod;
# its output in LOG. DIR is made anew.
go_module_src() {
    local module=$1 version=$2 dir=$3 logf=$4 src
    log "go mod download $module@$version"
    rm -rf "$dir"; mkdir -p "$dir"
    # a module directory of our own to ask go for the module's path
    printf 'module cpushield.test/k8s-node/%s\n\ngo 1.24.0\n' "$(basename "$dir")" >"$dir/go.mod"
    (cd "$dir" && go mod download -json "$module@$version") >"$dir/download.json" 2>"$logf" \
        || { tail -20 "$logf" >&2; die "go mod download $module@$version failed (log: $logf)"; }
    src=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["Dir"])' "$dir/download.json")
    cp -a "$src" "$dir/src"
    chmod -R u+w "$dir/src"
}
