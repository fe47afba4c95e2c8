#!/bin/sh
# summary: the boot half through a real bootloader (the guest boots from its
#   disk through SeaBIOS and GRUB): boot = true in the config makes apply
#   write a GRUB drop-in and run update-grub, verify says a reboot is
#   pending (8); after the reboot the kernel runs with the isolation options
#   and cpushield.service shields at boot; a change of CPUs and the removal
#   each take effect at the next reboot; off keeps the boot half; the last
#   boot is as the first (command line, grub.cfg, /etc/default/grub.d).
#   Four boots: apply | active, change, off | changed, remove | removed.
# distro: boot=grub reboot=yes boots=4 suites=trixie,forky default=no
# skip-why: the boot half on the two newest Debians (systemd 257 and 262); four boots each
. /job/lib.sh "$1"
. /job/boot-lib.sh
GRUBD=/etc/default/grub.d
# the kernel line of GRUB's default entry (the first one)
kline() { grep -m1 '^[[:space:]]*linux[[:space:]]' /boot/grub/grub.cfg; }
grubsum() { sha256sum /boot/grub/grub.cfg | cut -d' ' -f1; }
# the files in /etc/default/grub.d with mode, size and time (nothing when it does not exist)
grubd() { [ -d $GRUBD ] && ls -lA --time-style=+%s $GRUBD | sed 1d; true; }
dropin() { ls $GRUBD/*cpushield*.cfg 2>/dev/null; }

case $PHASE in
1)
    info "first boot: $(cmdline)"
    cmdline >"$OUT/cmdline.1"; grubsum >"$OUT/grubsum.1"; grubd >"$OUT/grubd.1"
    echo "$(sysfs isolated)/$(sysfs nohz_full)" >"$OUT/sysfs.1"
    info "isolated/nohz_full: $(cat "$OUT/sysfs.1")"
    ls -la $GRUBD/ 2>&1 | sed 's/^/    | /'
    check "booted through GRUB (/proc/cmdline starts with BOOT_IMAGE=), no isolation options" eval 'grep -q "^BOOT_IMAGE=" /proc/cmdline && has_none "$(cmdline)"'
    [ -f /job/cpushield.deb ] || { check "the job has the .deb (packaging/build-deb.sh)" false; result; }
    dpkg -i /job/cpushield.deb >"$OUT/dpkg-i.out" 2>&1; rc=$?
    check "dpkg -i exits 0" [ "$rc" = 0 ]
    mkdir -p /etc/cpushield
    printf '%s\n' 'cpus = "2-3"' 'tune = ["all"]' 'boot = true' >$CONF
    systemctl enable cpushield.service >/dev/null 2>&1
    check "systemctl enable cpushield" [ "$(systemctl is-enabled cpushield.service)" = enabled ]
    irqbalance_settle
    cs apply
    check "apply with boot = true: exit 0" [ "$CS_RC" = 0 ]
    info "drop-in $(dropin): $(cat "$(dropin)" 2>/dev/null | tr '\n' ' ')"
    check "apply wrote a drop-in in $GRUBD" [ -n "$(dropin)" ]
    info "GRUB's default kernel line: $(kline)"
    check "update-grub ran: grub.cfg's default entry has $OPTS23" has_all "$(kline)" "$OPTS23"
    irqbalance_settle
    cs verify
    check "before the reboot: verify exit 8 (reboot pending)" [ "$CS_RC" = 8 ]
    check "before the reboot: verify --json and boot --json say pending_reboot" boot_state_is pending_reboot
    check "before the reboot: metrics has cpushield_boot_reboot_pending 1" reboot_pending_metric 1
    reboot_and_resume
    ;;
2)
    info "second boot: $(cmdline)"
    check "rebooted through GRUB with $OPTS23" has_all "$(cmdline)" "$OPTS23"
    check "/sys/devices/system/cpu/nohz_full reads 2-3 (it reads '$(sysfs nohz_full)')" [ "$(sysfs nohz_full)" = 2-3 ]
    check "cpushield.service started at boot: active" [ "$(systemctl is-active cpushield.service)" = active ]
    irqbalance_settle
    cs status
    check "the shield is on: status exit 0" [ "$CS_RC" = 0 ]
    cs verify
    check "verify exit 0" [ "$CS_RC" = 0 ]
    check "verify --json and boot --json say active" boot_state_is active
    check "metrics has cpushield_boot_reboot_pending 0" reboot_pending_metric 0
    cs run --cpu 3 -- sh -c 'grep Cpus_allowed_list /proc/self/status'
    check "run --cpu 3: the command is allowed CPU 3 only" grep -q '^Cpus_allowed_list:[[:space:]]*3$' "$OUT/cs.out"

    info "changing the config to cpus = 3 (boot = true kept)"
    sed -i 's/^cpus = .*/cpus = "3"/' $CONF
    cs apply
    check "apply with cpus = 3: exit 0" [ "$CS_RC" = 0 ]
    info "GRUB's default kernel line: $(kline)"
    check "grub.cfg's default entry has $OPTS3" has_all "$(kline)" "$OPTS3"
    irqbalance_settle
    cs verify
    check "before the reboot: verify exit 8 again (reboot pending)" [ "$CS_RC" = 8 ]
    check "before the reboot: verify --json and boot --json say pending_reboot" boot_state_is pending_reboot

    info "off keeps the boot half (the next boot must have $OPTS3)"
    drop=$(dropin); before=$(cat "$drop" 2>/dev/null); sum=$(grubsum)
    cs off
    check "off: exit 0" [ "$CS_RC" = 0 ]
    check "off says that the boot half stays" grep -qi "boot half stays" "$OUT/cs.out"
    check "off left the drop-in as it was" eval '[ -n "$drop" ] && [ "$(cat "$drop" 2>/dev/null)" = "$before" ]'
    check "off left grub.cfg as it was" [ "$(grubsum)" = "$sum" ]
    reboot_and_resume
    ;;
3)
    info "third boot: $(cmdline)"
    check "rebooted with $OPTS3 (off kept them)" has_all "$(cmdline)" "$OPTS3"
    check "and without nohz_full=2-3" eval '! has_all "$(cmdline)" nohz_full=2-3'
    check "/sys/devices/system/cpu/nohz_full reads 3 (it reads '$(sysfs nohz_full)')" [ "$(sysfs nohz_full)" = 3 ]
    check "cpushield.service started at boot: active" [ "$(systemctl is-active cpushield.service)" = active ]
    irqbalance_settle
    cs verify
    check "verify exit 0" [ "$CS_RC" = 0 ]
    check "verify --json and boot --json say active" boot_state_is active

    # On the kernel booted with the boot half: on --tune by hand holds,
    # keeps new processes off the shield, runs a command there, and off
    # gives everything back exactly.
    cs off
    check "off of the unit's shield: exit 0" [ "$CS_RC" = 0 ]
    irqbalance_settle
    snap before-on
    cs on 2-3 --tune=all
    check "on 2-3 --tune=all on the boot-isolated kernel: exit 0" [ "$CS_RC" = 0 ]
    cs status
    check "status exit 0 (holds)" [ "$CS_RC" = 0 ]
    check "status: CPU 3 shielded and isolated at boot, CPU 2 shielded only" eval 'grep -Eq "shielded and isolated at boot +3" "$OUT/cs.out" && grep -Eq "shielded only .* +2" "$OUT/cs.out"'
    # --collect: the failed unit goes away (the snapshot after off must not list it)
    systemd-run --wait --quiet --collect --unit=cs-taskset-probe -p Type=oneshot taskset -c 2 true 2>/dev/null; rc=$?
    check "a service asking for CPU 2 by itself is refused by the kernel (exit $rc)" [ "$rc" != 0 ]
    cs run --cpu 3 -- sh -c 'grep Cpus_allowed_list /proc/self/status'
    check "run --cpu 3: the command is allowed CPU 3 only" grep -q '^Cpus_allowed_list:[[:space:]]*3$' "$OUT/cs.out"
    cs off
    check "off: exit 0" [ "$CS_RC" = 0 ]
    irqbalance_settle
    snap after-off
    snap_equal_after_irqbalance before-on after-off "off gives back exactly what on found"
    cs apply
    check "apply brings the config's shield back: exit 0" [ "$CS_RC" = 0 ]

    info "removing the boot line from the config"
    sed -i '/^boot *=/d' $CONF
    cs apply
    check "apply without boot: exit 0" [ "$CS_RC" = 0 ]
    check "the drop-in is gone" [ -z "$(dropin)" ]
    info "GRUB's default kernel line: $(kline)"
    check "grub.cfg's default entry has no isolation options" has_none "$(kline)"
    irqbalance_settle
    cs verify
    check "before the reboot: verify exit 8 (removal pending)" [ "$CS_RC" = 8 ]
    check "before the reboot: verify --json and boot --json say removal_pending" boot_state_is removal_pending
    reboot_and_resume
    ;;
4)
    info "fourth boot: $(cmdline)"
    check "/proc/cmdline is the first boot's" [ "$(cmdline)" = "$(cat "$OUT/cmdline.1")" ]
    check "grub.cfg is the first boot's (sha256)" [ "$(grubsum)" = "$(cat "$OUT/grubsum.1")" ]
    grubd >"$OUT/grubd.4"
    diff "$OUT/grubd.1" "$OUT/grubd.4" | sed 's/^/    /'
    check "$GRUBD lists as in the first boot" cmp -s "$OUT/grubd.1" "$OUT/grubd.4"
    check "/sys/devices/system/cpu/isolated and nohz_full read as in the first boot ('$(cat "$OUT/sysfs.1")')" [ "$(sysfs isolated)/$(sysfs nohz_full)" = "$(cat "$OUT/sysfs.1")" ]
    check "boot --json says absent" eval 'csj boot boot --json; [ "$(bstate "$OUT/boot.json")" = absent ]'
    irqbalance_settle
    cs verify
    check "nothing pending: verify exit 0" [ "$CS_RC" = 0 ]
    ;;
esac
result
