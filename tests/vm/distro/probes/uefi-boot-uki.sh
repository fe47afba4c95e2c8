#!/bin/sh
# summary: the UEFI boot machinery itself, without cpushield: the guest
#   booted through OVMF, systemd-boot and a UKI kernel-install built with
#   ukify (image.sh --uefi uki); a global addon in ESP/loader/addons
#   (quiet2=1) and one in <uki>.efi.extra.d (quiet3=1), both made with
#   ukify build --cmdline=, reach /proc/cmdline at the next boot, and
#   removing them gives back the same files. Prints what uefi-boot-sdboot
#   prints (the body: tests/vm/distro/guest/uefi-boot.sh)
# distro: boot=uki reboot=yes boots=2 suites=trixie
KIND=uki
. /job/uefi-boot.sh "$1"
