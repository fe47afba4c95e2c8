#!/bin/sh
# summary: the UEFI boot machinery itself, without cpushield: the guest
#   booted through OVMF and GRUB EFI from the fallback path
#   EFI/BOOT/BOOTX64.EFI (image.sh --uefi grub-efi); GRUB_CMDLINE_LINUX_DEFAULT
#   extended at the end of /etc/default/grub and grub-mkconfig reach
#   /proc/cmdline at the next boot, and undoing both gives back the same
#   files. Prints what uefi-boot-sdboot prints, and whether GRUB set
#   LoaderInfo (its bli module) (the body: tests/vm/distro/guest/uefi-boot.sh)
# distro: boot=grub-efi reboot=yes boots=2 suites=trixie
KIND=grub-efi
. /job/uefi-boot.sh "$1"
