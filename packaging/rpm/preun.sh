#!/bin/sh
# cpushield %preun, the .deb's prerm in RPM terms. Removing the package
# never changes the running system: an active shield stays as it is
# (stopping it here would move real-time tasks and IRQs under a running
# workload; the %systemd_preun macro would stop cpushield.service, so the
# package does not use it). So that the shield can still be undone once
# /usr/sbin/cpushield is gone, a copy of the binary is kept, and the user
# is told how to run it. The logic is packaging/debian/prerm's: keep the
# two in step.
#
# $1 is how many cpushield packages stay installed: 0 on an erase, 1 or
# more when an upgrade removes the old package (then the new binary is
# already in place, and the shield and its journal stay).
set -e

# The copy goes to /run/cpushield (tmpfs: gone at reboot, when the shield
# is gone too). An initramfs may mount /run noexec (Debian's does), so the
# copy is run once (--version, read-only) to see that it can be executed;
# if not, it goes to /var/lib/cpushield instead. RPM has no purge that
# would delete that one, so the user is told to.
keep_off_binary() {
    if [ -d /run/cpushield ] && [ ! -L /run/cpushield ] \
        && install -m 0700 /usr/sbin/cpushield /run/cpushield/cpushield-off 2>/dev/null \
        && /run/cpushield/cpushield-off --version >/dev/null 2>&1; then
        off=/run/cpushield/cpushield-off
        lasts="until the next boot (the shield ends then too)"
    else
        rm -f /run/cpushield/cpushield-off 2>/dev/null || true
        install -d -m 0700 /var/lib/cpushield
        install -m 0700 /usr/sbin/cpushield /var/lib/cpushield/cpushield-off
        off=/var/lib/cpushield/cpushield-off
        lasts="until you delete it (rm /var/lib/cpushield/cpushield-off, once 'off' has run)"
    fi
    cat <<MSG
cpushield: a shield is active and stays: removing the package changes
nothing on the running system. To undo the shield, run as root:
    $off off
This copy of cpushield is kept $lasts.
"systemctl stop cpushield" cannot undo it any more: its binary is gone.
MSG
}

# The boot half (config key "boot") outlives the package. The .deb takes it
# out on purge; RPM has no purge, and an erase that rewrote the boot
# loader's configuration would change the next boot, which removing a
# package must not do behind the administrator's back. So it stays, and a
# copy of the binary is kept to take it out by hand.
keep_boot_binary() {
    install -d -m 0700 /var/lib/cpushield
    [ -x /var/lib/cpushield/cpushield-off ] \
        || install -m 0700 /usr/sbin/cpushield /var/lib/cpushield/cpushield-off
    cat <<MSG
cpushield: the boot half (kernel command line options written through the
bootloader; its files are listed in /var/lib/cpushield/boot.json) stays.
To take it out (it takes effect at the next boot), run as root:
    /var/lib/cpushield/cpushield-off boot --remove
and then, with no shield left to undo: rm -r /var/lib/cpushield
MSG
}

if [ "$1" = 0 ]; then
    # A journal directory means a shield is active, or an interrupted
    # "on" left something to undo: either way "off" must stay possible.
    if [ -d /run/cpushield/journal ] && [ -x /usr/sbin/cpushield ]; then
        keep_off_binary
    fi
    if [ -f /var/lib/cpushield/boot.json ] && [ -x /usr/sbin/cpushield ]; then
        keep_boot_binary
    fi
fi

exit 0
