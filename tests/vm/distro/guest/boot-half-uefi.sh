# The body of the boot-half scenarios booted through UEFI (sourced by
# 08-boot-sdboot, 09-boot-uki and 10-boot-grub-efi with KIND set): boot =
# true in the config makes apply write the boot half the way the loader
# that booted takes it; a reboot makes it active (/proc/cmdline, sysfs);
# a change of CPUs and the removal each take effect at the next reboot;
# the loader's files end byte-identical to before apply.
#   sdboot    systemd-boot with a type #1 entry from kernel-install: the
#             entry's options and /etc/kernel/cmdline (created, then gone).
#             The first boot puts nohz_full=1 into the entry by hand, as a
#             user would, so the next boot runs with an isolation option of
#             the user's: apply must leave one nohz_full= and say so. Then
#             kernel-install add again (a kernel update) must keep the
#             options. Five boots.
#   uki       systemd-boot starting a unified kernel image: an addon made
#             with ukify in ESP/loader/addons/. Four boots.
#   grub-efi  GRUB EFI with update-grub taken away (an upstream layout: no
#             grub.d drop-ins are read by grub-mkconfig): a block at the end
#             of /etc/default/grub and grub-mkconfig -o /boot/grub/grub.cfg.
#             Four boots.
. /job/lib.sh "$1"
. /job/boot-lib.sh
ESP=/boot/efi
EV=/sys/firmware/efi/efivars
LOADER_GUID=4a67b082-0a4c-41cf-b6c7-440b29bb8c4f
# ev NAME: a Boot Loader Interface variable as text
ev() {
    f=$EV/$1-$LOADER_GUID
    [ -f "$f" ] && cat "$f" | tail -c +5 | iconv -f UTF-16LE -t UTF-8 | tr -d '\000'
}
# entry: the booted type #1 entry (LoaderEntrySelected, boot counter or not)
entry() {
    les=$(ev LoaderEntrySelected)
    ls -d "$ESP/loader/entries/$les" "$ESP/loader/entries/${les%.conf}.conf" "$ESP/loader/entries/${les%.conf}"+*.conf 2>/dev/null | head -n1
}
# files: the loader's files the boot half may touch, hashed, and the lists
# of the directories it may add to (loader/random-seed left out: systemd-boot
# renews it at every boot)
files() {
    case $KIND in
    sdboot) sha256sum "$ESP"/loader/entries/*.conf ;;
    uki) sha256sum "$ESP"/EFI/Linux/*.efi ;;
    grub-efi) sha256sum /etc/default/grub /boot/grub/grub.cfg ;;
    esac
    (cd "$ESP" && find . | grep -v '^\./loader/random-seed$' | sort)
    echo "/etc/kernel: $(ls -A /etc/kernel 2>/dev/null | tr '\n' ' ')"
    echo "/etc/default/grub.d: $(ls -A /etc/default/grub.d 2>/dev/null | tr '\n' ' ')"
}
# pe_cmdline FILE: the .cmdline section of a PE file (an addon), read with
# the section table as the PE format lays it out
pe_cmdline() {
    python3 - "$1" <<'PY' 2>/dev/null
import struct, sys
d = open(sys.argv[1], 'rb').read()
pe = struct.unpack_from('<I', d, 0x3c)[0]
n, = struct.unpack_from('<H', d, pe + 6)
opt, = struct.unpack_from('<H', d, pe + 20)
for i in range(n):
    h = pe + 24 + opt + 40 * i
    vsize, _, rsize, rptr = struct.unpack_from('<IIII', d, h + 8)
    if d[h:h + 8].rstrip(b'\0') == b'.cmdline':
        print(d[rptr:rptr + min(vsize, rsize)].rstrip(b'\0').decode().strip())
PY
}
# the boot's identity and what cpushield says of the boot half
show() {
    # printf: dash's echo would eat the backslashes of systemd-boot's initrd=\...
    printf '  [%s] boot %s: /proc/cmdline: %s\n' "$(el)" "$PHASE" "$(cmdline)"
    info "LoaderInfo=$(ev LoaderInfo) LoaderEntrySelected=$(ev LoaderEntrySelected) StubInfo=$(ev StubInfo)"
    info "sysfs isolated='$(sysfs isolated)' nohz_full='$(sysfs nohz_full)'"
    cs boot
}
# kline: where the next boot's command line is, in the loader's files
kline() {
    case $KIND in
    sdboot) grep -m1 '^options' "$(entry)" ;;
    uki) pe_cmdline "$ESP/loader/addons/cpushield.addon.efi" ;;
    grub-efi) grep -m1 '^[[:space:]]*linux[[:space:]]' /boot/grub/grub.cfg ;;
    esac
}
# the phase the boot half is first applied in (sdboot first boots once with
# the user's own nohz_full=1)
A=1; [ "$KIND" = sdboot ] && A=2

if [ "$PHASE" = 1 ]; then
    show
    check "booted through UEFI" [ -d /sys/firmware/efi ]
    case $KIND in
    sdboot|uki) check "LoaderInfo says systemd-boot" eval 'ev LoaderInfo | grep -q "^systemd-boot "' ;;
    grub-efi) check "booted through GRUB (BOOT_IMAGE=)" grep -q '^BOOT_IMAGE=' /proc/cmdline ;;
    esac
    [ "$KIND" = uki ] && check "a unified kernel image ran (StubInfo)" [ -n "$(ev StubInfo)" ]
    check "no isolation options yet" has_none "$(cmdline)"
    if [ "$KIND" = grub-efi ]; then
        # an upstream layout: no update-grub, so cpushield must run grub-mkconfig itself
        mv /usr/sbin/update-grub /root/update-grub.away
        check "update-grub is gone (upstream GRUB layout)" [ ! -e /usr/sbin/update-grub ]
    fi
fi
if [ "$KIND" = sdboot ] && [ "$PHASE" = 1 ]; then
    e=$(entry)
    info "the user adds nohz_full=1 to $e"
    sed -i 's/^\(options.*\)$/\1 nohz_full=1/' "$e"
    sed 's/^/    | /' "$e"
    reboot_and_resume
fi

if [ "$PHASE" = "$A" ]; then
    [ "$PHASE" = 1 ] || show
    if [ "$KIND" = sdboot ]; then
        check "booted with the user's nohz_full=1" has_all "$(cmdline)" nohz_full=1
        check "sysfs nohz_full reads 1" [ "$(sysfs nohz_full)" = 1 ]
    fi
    cmdline >"$OUT/cmdline.before"; files >"$OUT/files.before"
    sed 's/^/    | /' "$OUT/files.before" | head -n 30
    mkdir -p /etc/cpushield
    printf '%s\n' 'cpus = "2-3"' 'boot = true' >$CONF
    cs apply
    check "apply with boot = true: exit 0" [ "$CS_RC" = 0 ]
    case $KIND in
    sdboot) check "apply says systemd-boot" grep -q "bootloader.*systemd-boot" "$OUT/cs.out"
            check "apply says it left the user's nohz_full=1 out" grep -q "replaced.*nohz_full=1" "$OUT/cs.out"
            check "/etc/kernel/cmdline was created with $OPTS23" eval 'has_all "$(cat /etc/kernel/cmdline)" "$OPTS23"' ;;
    uki) check "apply made the addon" [ -f "$ESP/loader/addons/cpushield.addon.efi" ]
         check "apply says ukify" grep -q "ukify" "$OUT/cs.out" ;;
    grub-efi) check "apply ran grub-mkconfig" grep -q "grub-mkconfig -o /boot/grub/grub.cfg" "$OUT/cs.out"
              check "/etc/default/grub ends with cpushield's block" eval 'tail -n1 /etc/default/grub | grep -q "^# cpushield: end"'
              check "no drop-in was written" [ -z "$(ls -A /etc/default/grub.d 2>/dev/null)" ] ;;
    esac
    info "the next boot's line: $(kline)"
    check "the loader's files carry $OPTS23" has_all "$(kline)" "$OPTS23"
    check "each isolation key once there" keys_once "$(kline)"
    if [ "$KIND" = sdboot ]; then
        info "a kernel update: kernel-install add $(uname -r) again"
        kernel-install add "$(uname -r)" "/boot/vmlinuz-$(uname -r)" "/boot/initrd.img-$(uname -r)" >"$OUT/kernel-install.out" 2>&1
        check "kernel-install add: exit 0" [ $? = 0 ]
        sed 's/^/    | /' "$(entry)"
        check "the rewritten entry still carries $OPTS23, each key once" eval 'has_all "$(kline)" "$OPTS23" && keys_once "$(kline)"'
    fi
    cs verify
    check "before the reboot: verify exit 8 (reboot pending)" [ "$CS_RC" = 8 ]
    check "before the reboot: verify --json and boot --json say pending_reboot" boot_state_is pending_reboot
    check "before the reboot: metrics has cpushield_boot_reboot_pending 1" reboot_pending_metric 1
    reboot_and_resume
fi

if [ "$PHASE" = $((A + 1)) ]; then
    show
    check "rebooted with $OPTS23" has_all "$(cmdline)" "$OPTS23"
    check "each isolation key once on /proc/cmdline" keys_once "$(cmdline)"
    check "sysfs nohz_full reads 2-3 (it reads '$(sysfs nohz_full)')" [ "$(sysfs nohz_full)" = 2-3 ]
    check "verify --json and boot --json say active" boot_state_is active
    check "metrics has cpushield_boot_reboot_pending 0" reboot_pending_metric 0
    info "changing the config to cpus = 3 (boot = true kept)"
    sed -i 's/^cpus = .*/cpus = "3"/' $CONF
    cs apply
    check "apply with cpus = 3: exit 0" [ "$CS_RC" = 0 ]
    info "the next boot's line: $(kline)"
    check "the loader's files carry $OPTS3, each key once" eval 'has_all "$(kline)" "$OPTS3" && keys_once "$(kline)"'
    check "before the reboot: boot --json says pending_reboot" eval 'csj boot boot --json; [ "$(bstate "$OUT/boot.json")" = pending_reboot ]'
    reboot_and_resume
fi

if [ "$PHASE" = $((A + 2)) ]; then
    show
    check "rebooted with $OPTS3" has_all "$(cmdline)" "$OPTS3"
    check "and without nohz_full=2-3" eval '! has_all "$(cmdline)" nohz_full=2-3'
    check "sysfs nohz_full reads 3 (it reads '$(sysfs nohz_full)')" [ "$(sysfs nohz_full)" = 3 ]
    check "boot --json says active" eval 'csj boot boot --json; [ "$(bstate "$OUT/boot.json")" = active ]'
    info "removing the boot line from the config"
    sed -i '/^boot *=/d' $CONF
    cs apply
    check "apply without boot: exit 0" [ "$CS_RC" = 0 ]
    files >"$OUT/files.after"
    diff "$OUT/files.before" "$OUT/files.after" | sed 's/^/    /'
    check "the loader's files are byte-identical to before apply (sha256, ESP listing, /etc/kernel)" cmp -s "$OUT/files.before" "$OUT/files.after"
    [ "$KIND" = sdboot ] && check "/etc/kernel/cmdline is gone again" [ ! -e /etc/kernel/cmdline ]
    check "before the reboot: boot --json says removal_pending" eval 'csj boot boot --json; [ "$(bstate "$OUT/boot.json")" = removal_pending ]'
    cs off
    reboot_and_resume
fi

if [ "$PHASE" = $((A + 3)) ]; then
    show
    check "/proc/cmdline is as before apply" [ "$(cmdline)" = "$(cat "$OUT/cmdline.before")" ]
    files >"$OUT/files.last"
    check "the loader's files are as before apply" cmp -s "$OUT/files.before" "$OUT/files.last"
    if [ "$KIND" = sdboot ]; then
        check "boot --json says external (the user's own nohz_full=1)" eval 'csj boot boot --json; [ "$(bstate "$OUT/boot.json")" = external ]'
    else
        check "boot --json says absent" eval 'csj boot boot --json; [ "$(bstate "$OUT/boot.json")" = absent ]'
    fi
    [ "$KIND" = grub-efi ] && mv /root/update-grub.away /usr/sbin/update-grub
fi
result
