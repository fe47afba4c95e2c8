#!/bin/sh
# summary: the boot half through systemd-boot (a type #1 entry from kernel-install, /etc/kernel/cmdline), booted
#   through OVMF: write, reboot pending, active after the reboot, a change
#   of CPUs, removal, the loader's files byte-identical to before (the body:
#   tests/vm/distro/guest/boot-half-uefi.sh). 5 boots; not in CI (too
#   slow under emulation): benches/boot-uefi.sh runs all three.
# distro: boot=sdboot reboot=yes boots=5 suites=trixie default=no
# skip-why: the boot half through UEFI runs on Debian 13 (systemd 257, ukify)
KIND=sdboot
. /job/boot-half-uefi.sh "$1"
