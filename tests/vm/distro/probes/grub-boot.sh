#!/bin/sh
# summary: the GRUB boot machinery itself, without cpushield: the guest
#   booted from its disk through GRUB; a drop-in of its own in
#   /etc/default/grub.d (quiet2=1) and update-grub reach /proc/cmdline at
#   the next boot; the job disk and the results survive the reboot; taking
#   the drop-in out gives back the same grub.cfg
# distro: boot=grub reboot=yes boots=2 suites=trixie,forky
. /job/lib.sh "$1"
GRUBD=/etc/default/grub.d
DROP=$GRUBD/cs-test-probe.cfg
words() { tr ' ' '\n' </proc/cmdline | grep -v '^$'; }
# the files in /etc/default/grub.d with mode, size and time (nothing when it does not exist)
grubd() { [ -d $GRUBD ] && ls -lA --time-style=+%s $GRUBD | sed 1d; true; }
if [ "$PHASE" = 1 ]; then
    info "first boot: $(cat /proc/cmdline)"
    cat /proc/cmdline >"$OUT/cmdline.1"
    sha256sum /boot/grub/grub.cfg >"$OUT/grubcfg.1"
    grubd >"$OUT/grubd.1"
    info "$GRUBD: $(ls -la $GRUBD 2>&1 | tr '\n' ' ')"
    check "booted through GRUB: /proc/cmdline starts with BOOT_IMAGE=" grep -q '^BOOT_IMAGE=' /proc/cmdline
    check "the kernel's console is ttyS0 (GRUB_CMDLINE_LINUX)" eval 'words | grep -qx console=ttyS0'
    check "no quiet2=1 yet" eval '! words | grep -qx quiet2=1'
    mkdir -p $GRUBD
    echo 'GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT quiet2=1"' >$DROP
    update-grub >"$OUT/update-grub.1" 2>&1; rc=$?
    sed 's/^/    | /' "$OUT/update-grub.1"
    check "update-grub with a drop-in in $GRUBD: exit 0" [ "$rc" = 0 ]
    check "grub.cfg's first kernel line has quiet2=1" eval "grep -m1 '^[[:space:]]*linux[[:space:]]' /boot/grub/grub.cfg | grep -q ' quiet2=1'"
    reboot_and_resume
fi
info "second boot: $(cat /proc/cmdline)"
check "rebooted through GRUB: /proc/cmdline starts with BOOT_IMAGE=" grep -q '^BOOT_IMAGE=' /proc/cmdline
check "the drop-in reached /proc/cmdline: quiet2=1" eval 'words | grep -qx quiet2=1'
check "otherwise the same command line as the first boot" [ "$(sed 's/ quiet2=1//' /proc/cmdline)" = "$(cat "$OUT/cmdline.1")" ]
check "the first boot's results are still there" [ -s "$OUT/cmdline.1" ]
check "the job disk was read again: /job/cpushield is there" [ -x /job/cpushield ]
rm -f $DROP
update-grub >"$OUT/update-grub.2" 2>&1; rc=$?
check "update-grub without the drop-in: exit 0" [ "$rc" = 0 ]
check "grub.cfg is the first boot's again (sha256)" [ "$(sha256sum /boot/grub/grub.cfg)" = "$(cat "$OUT/grubcfg.1")" ]
check "$GRUBD lists as in the first boot" [ "$(grubd)" = "$(cat "$OUT/grubd.1")" ]
result
