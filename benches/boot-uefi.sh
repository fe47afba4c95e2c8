#!/usr/bin/env bash
# The boot half through UEFI, each from apply to the boot after its removal:
# systemd-boot with a type #1 entry (08-boot-sdboot, five boots: the first
# adds the user's own nohz_full=1), a unified kernel image with a ukify
# addon (09-boot-uki, four boots) and GRUB EFI with grub-mkconfig on an
# upstream layout (10-boot-grub-efi, four boots), in Debian 13 guests booted
# through OVMF (tests/vm/distro/image.sh --uefi). Out of CI for time (2 to
# 4 minutes a boot under emulation, 9 to 18 a scenario); CI runs the GRUB scenario 06 and the
# backends' fixture tests (tests/boot_fixture.rs).
#   benches/boot-uefi.sh [SCENARIO...]     (default: all three)
# As root, with QEMU and OVMF (tests/vm/ci.sh --install-only). Nothing on
# this machine is changed: the bootloaders are the guests'.
set -euo pipefail
cd "$(dirname "$0")/.."
REL=target/x86_64-unknown-linux-gnu/release
[ -x "$REL/cpushield" ] || { echo "build the static binary first (README, 'Tests')" >&2; exit 2; }
SCEN=("$@")
[ ${#SCEN[@]} = 0 ] && SCEN=(08-boot-sdboot 09-boot-uki 10-boot-grub-efi)
exec tests/vm/distro/run.sh --suite trixie --binary "$REL/cpushield" "${SCEN[@]}"
