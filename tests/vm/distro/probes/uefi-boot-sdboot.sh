#!/bin/sh
# summary: the UEFI boot machinery itself, without cpushield: the guest
#   booted through OVMF and systemd-boot from its disk (image.sh --uefi
#   sdboot, a BLS type #1 entry kernel-install wrote); a second line
#   "options quiet2=1" in the booted entry reaches /proc/cmdline at the next
#   boot, and taking it out gives back the same files. Prints the Boot
#   Loader Interface variables, bootctl's view, the ESP and the entries on
#   each boot (the body: tests/vm/distro/guest/uefi-boot.sh)
# distro: boot=sdboot reboot=yes boots=2 suites=trixie
KIND=sdboot
. /job/uefi-boot.sh "$1"
