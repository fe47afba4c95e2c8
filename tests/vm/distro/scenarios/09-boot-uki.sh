#!/bin/sh
# summary: the boot half through a unified kernel image started by systemd-boot (a command-line addon made with ukify), booted
#   through OVMF: write, reboot pending, active after the reboot, a change
#   of CPUs, removal, the loader's files byte-identical to before (the body:
#   tests/vm/distro/guest/boot-half-uefi.sh). 4 boots; not in CI (too
#   slow under emulation): benches/boot-uefi.sh runs all three.
# distro: boot=uki reboot=yes boots=4 suites=trixie default=no
# skip-why: the boot half through UEFI runs on Debian 13 (systemd 257, ukify)
KIND=uki
. /job/boot-half-uefi.sh "$1"
