# The body of the probes uefi-boot-sdboot, uefi-boot-uki and uefi-boot-grub-efi
# (sourced by them with KIND set; in /job like lib.sh): the UEFI boot
# machinery itself, without cpushield. On each boot it prints what a boot
# backend would read (/proc/cmdline, the Boot Loader Interface variables,
# bootctl's view, the ESP, the entries); the first boot then changes the
# next boot's command line the loader's own way and reboots:
#   sdboot    a line "options quiet2=1" appended to the booted entry (the
#             file LoaderEntrySelected names, under bootctl --print-boot-path)
#   uki       a global addon ESP/loader/addons/cs-probe.addon.efi (quiet2=1)
#             and one for the booted UKI only, <uki>.efi.extra.d/ (quiet3=1),
#             made with ukify build --cmdline= (no --linux: an addon)
#   grub-efi  GRUB_CMDLINE_LINUX_DEFAULT extended at the end of
#             /etc/default/grub, then grub-mkconfig -o /boot/grub/grub.cfg
# The second boot checks the words arrived and nothing else changed, undoes
# the change and checks the files are byte-identical to the first boot's.
# There is no /etc/kernel/cmdline in these images, on purpose.
. /job/lib.sh "$1"
LOADER_GUID=4a67b082-0a4c-41cf-b6c7-440b29bb8c4f
GLOBAL_GUID=8be4df61-93ca-11d2-aa0d-00e098032b8c
EV=/sys/firmware/efi/efivars
# ev NAME [GUID]: a variable as text (UTF-16LE, NUL-terminated; efivarfs puts
# 4 bytes of attributes first); several strings (LoaderEntries) one a line.
# efivarfs files cannot seek: read them through cat.
ev() {
    f=$EV/$1-${2:-$LOADER_GUID}
    [ -f "$f" ] || return 0
    cat "$f" | tail -c +5 | iconv -f UTF-16LE -t UTF-8 | tr '\000' '\n' | sed '/^$/d'
}
# evx NAME [GUID]: a variable's data in hex (the attributes left out)
evx() {
    f=$EV/$1-${2:-$LOADER_GUID}
    [ -f "$f" ] || return 0
    cat "$f" | tail -c +5 | od -An -tx1 | tr -s ' \n' ' ' | sed 's/^ //; s/ $//'
}
words() { tr ' ' '\n' </proc/cmdline | grep -v '^$'; }
has_word() { words | grep -qxF "$1"; }
line() { printf '  %s\n' "$*"; }
now() { date +%s.%N | cut -c1-14; }
minus() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", a - b }'; }
[ -f "$OUT/boot-times" ] || : >"$OUT/boot-times"

info "boot $PHASE of $KIND at $(now) (clock from the host's RTC), uptime $(cut -d' ' -f1 /proc/uptime)s"
# Boot times, wall clock: the guest's clock comes from QEMU's RTC, set from
# the host's at each boot (1 s resolution; timesyncd is masked). From the
# last boot's "systemctl reboot" (or, in the first boot, from HOST_T0, the
# host's clock when run.sh started: --set HOST_T0=$(date +%s.%N)) to here,
# and how much of it came before the kernel started (the previous system's
# shutdown, OVMF, the loader): that minus the uptime.
up=$(cut -d' ' -f1 /proc/uptime); t=$(now)
from=""
if [ -f "$OUT/reboot-at" ]; then from=$(cat "$OUT/reboot-at"); what="the last boot's reboot"
elif [ -n "${HOST_T0:-}" ]; then from=$HOST_T0; what="run.sh's start (HOST_T0)"; fi
if [ -n "$from" ]; then
    info "boot $PHASE: from $what to the probe $(minus "$t" "$from")s, of which before the kernel $(minus "$(minus "$t" "$from")" "$up")s; uptime ${up}s"
    echo "boot $PHASE: from $what to the probe $(minus "$t" "$from")s (before the kernel $(minus "$(minus "$t" "$from")" "$up")s, uptime ${up}s)" >>"$OUT/boot-times"
else
    echo "boot $PHASE: uptime at the probe ${up}s" >>"$OUT/boot-times"
fi
printf '  /proc/cmdline: %s\n' "$(cat /proc/cmdline)"
cat /proc/cmdline >"$OUT/cmdline.$PHASE"
info "systemd-analyze: $(systemd-analyze 2>&1 | head -n1)"

# ---- the Boot Loader Interface variables
LI=$(ev LoaderInfo); LES=$(ev LoaderEntrySelected); SI=$(ev StubInfo)
line "LoaderInfo=$LI"
line "LoaderEntrySelected=$LES"
line "LoaderEntries=$(ev LoaderEntries | tr '\n' ' ')"
line "LoaderEntryDefault=$(ev LoaderEntryDefault)"
line "StubInfo=$SI"
line "LoaderDevicePartUUID=$(ev LoaderDevicePartUUID)"
line "LoaderImageIdentifier=$(ev LoaderImageIdentifier)"
line "LoaderFirmwareInfo=$(ev LoaderFirmwareInfo) LoaderFirmwareType=$(ev LoaderFirmwareType)"
line "LoaderTimeInitUSec=$(ev LoaderTimeInitUSec) LoaderTimeExecUSec=$(ev LoaderTimeExecUSec) LoaderTimeMenuUSec=$(ev LoaderTimeMenuUSec)"
line "LoaderFeatures=$(evx LoaderFeatures) StubFeatures=$(evx StubFeatures)"
line "StubImageIdentifier=$(ev StubImageIdentifier)"
line "SecureBoot=$(evx SecureBoot $GLOBAL_GUID) SetupMode=$(evx SetupMode $GLOBAL_GUID)"
line "all variables of the loader GUID: $(ls $EV | grep -- "-$LOADER_GUID\$" | sed "s/-$LOADER_GUID\$//" | sort | tr '\n' ' ')"
line "efibootmgr: $(efibootmgr 2>&1 | grep -v '^ *dp:' | tr '\n' '|')"
echo "$LI|$LES|$SI" >"$OUT/loader.$PHASE"

# ---- bootctl, the ESP, the entries
info "bootctl status (first 40 lines):"
SYSTEMD_COLORS=0 bootctl status --no-pager 2>&1 | head -n 40 | sed 's/^/    | /'
BOOT=$(bootctl --print-boot-path 2>"$OUT/boot-path.err"); BRC=$?
ESP=$(bootctl --print-esp-path 2>"$OUT/esp-path.err"); ERC=$?
line "bootctl --print-boot-path: '$BOOT' (exit $BRC) $(cat "$OUT/boot-path.err")"
line "bootctl --print-esp-path: '$ESP' (exit $ERC) $(cat "$OUT/esp-path.err")"
line "mounts: $(findmnt -rn -o TARGET,SOURCE,FSTYPE | grep -E '^/(boot|efi)' | tr '\n' ' ')"
line "/etc/kernel/cmdline: $([ -e /etc/kernel/cmdline ] && echo "present: $(cat /etc/kernel/cmdline)" || echo absent)"
line "/etc/kernel: $(ls -A /etc/kernel 2>&1 | tr '\n' ' ')"
for f in /etc/kernel/install.conf /etc/kernel/uki.conf /usr/lib/kernel/install.conf /usr/lib/kernel/uki.conf; do
    [ -f "$f" ] && line "$f: $(grep -v '^#' "$f" | grep -v '^$' | tr '\n' ' ')"
done
line "addon stub: $(ls -l /usr/lib/systemd/boot/efi/addonx64.efi.stub 2>&1)"
# without bootctl (GRUB systems do not have systemd-boot): the vfat mount
if ! command -v bootctl >/dev/null; then
    ESP=$(findmnt -rn -t vfat -o TARGET | head -n1); BOOT=$ESP
    line "no bootctl; the ESP from findmnt (vfat): '$ESP'"
fi
ESP_PARTUUID=$(findmnt -n -o PARTUUID "$ESP" 2>/dev/null)
line "the ESP's PARTUUID: $ESP_PARTUUID"
info "ls -lR $ESP/loader $ESP/EFI:"
ls -lR "$ESP/loader" "$ESP/EFI" 2>&1 | sed 's/^/    | /'
for e in "$BOOT"/loader/entries/*.conf; do
    [ -f "$e" ] || continue
    info "entry $e:"; sed 's/^/    | /' "$e"
done
info "bootctl list:"
SYSTEMD_COLORS=0 bootctl list --no-pager 2>&1 | head -n 30 | sed 's/^/    | /'
if [ "$KIND" = uki ]; then
    for u in "$BOOT"/EFI/Linux/*.efi; do
        [ -f "$u" ] || continue
        info "UKI $u ($(stat -c %s "$u") bytes), ukify inspect:"
        ukify inspect "$u" 2>&1 | head -n 40 | sed 's/^/    | /'
    done
fi
if [ "$KIND" = grub-efi ]; then
    line "grub.cfg: bli: $(grep -n bli /boot/grub/grub.cfg | tr '\n' ' ')"
    line "grub.cfg first linux line: $(grep -m1 '^[[:space:]]*linux[[:space:]]' /boot/grub/grub.cfg)"
    line "bli.mod: $(ls /boot/grub/x86_64-efi/bli.mod /usr/lib/grub/x86_64-efi/bli.mod 2>&1 | tr '\n' ' ')"
    line "/etc/grub.d: $(ls /etc/grub.d | tr '\n' ' ')"
fi

# ---- what boot each one is
check "booted through UEFI (/sys/firmware/efi)" [ -d /sys/firmware/efi ]
check "Secure Boot is off" [ "$(evx SecureBoot $GLOBAL_GUID)" = 00 ]
check "no /etc/kernel/cmdline" [ ! -e /etc/kernel/cmdline ]
check "the ESP is at /boot/efi" [ "$ESP" = /boot/efi ]
check "LoaderDevicePartUUID is the ESP's PARTUUID" [ "$(ev LoaderDevicePartUUID | tr A-F a-f)" = "$ESP_PARTUUID" ]
check "the kernel's console is ttyS0" has_word console=ttyS0
case $KIND in
sdboot|uki)
    check "LoaderInfo says systemd-boot" eval 'echo "$LI" | grep -q "^systemd-boot "'
    check "LoaderEntrySelected is set" [ -n "$LES" ]
    check "\$BOOT is the ESP (no XBOOTLDR)" [ "$BOOT" = "$ESP" ] ;;
esac
case $KIND in
sdboot)
    # the id is the file name, with or without .conf, without a +N-M boot counter
    ENTRY=$(ls -d "$BOOT/loader/entries/$LES" "$BOOT/loader/entries/${LES%.conf}.conf" "$BOOT/loader/entries/${LES%.conf}"+*.conf 2>/dev/null | head -n1)
    check "the selected entry is a type #1 .conf file: $ENTRY" [ -f "$ENTRY" ]
    check "no StubInfo (the kernel's own EFI stub, not systemd-stub)" [ -z "$SI" ]
    check "not a GRUB boot (no BOOT_IMAGE=)" eval '! grep -q "^BOOT_IMAGE=" /proc/cmdline' ;;
uki)
    UKI=$BOOT/EFI/Linux/$LES
    check "the selected entry is a UKI: $UKI" eval 'case "$LES" in *.efi) [ -f "$UKI" ] ;; *) false ;; esac'
    check "StubInfo says systemd-stub" eval 'echo "$SI" | grep -q "^systemd-stub "'
    check "the addon stub is there" [ -f /usr/lib/systemd/boot/efi/addonx64.efi.stub ] ;;
grub-efi)
    check "booted through GRUB: /proc/cmdline starts with BOOT_IMAGE=" grep -q '^BOOT_IMAGE=' /proc/cmdline
    check "GRUB's EFI loader is the fallback path EFI/BOOT/BOOTX64.EFI" [ -f "$ESP/EFI/BOOT/BOOTX64.EFI" ] ;;
esac

# files: what the change touches, with their hashes (and the ESP's file list,
# without loader/random-seed, which systemd-boot renews at every boot)
files() {
    case $KIND in
    sdboot) sha256sum "$BOOT"/loader/entries/*.conf "$ESP/loader/loader.conf" ;;
    uki) sha256sum "$BOOT"/EFI/Linux/*.efi "$ESP/loader/loader.conf" ;;
    grub-efi) sha256sum /etc/default/grub /boot/grub/grub.cfg ;;
    esac
    (cd "$ESP" && find . | grep -v '^\./loader/random-seed$' | sort)
    ls -A /etc/kernel /etc/default/grub.d 2>/dev/null
}

if [ "$PHASE" = 1 ]; then
    files >"$OUT/files.1"
    check "no quiet2=1 yet" eval '! has_word quiet2=1'
    case $KIND in
    sdboot)
        line "the entry's options as kernel-install wrote them: $(grep '^options' "$ENTRY")"
        echo 'options quiet2=1' >>"$ENTRY"
        check "the entry has a second options line, quiet2=1" [ "$(grep -c '^options' "$ENTRY")" = 2 ]
        info "the entry now:"; sed 's/^/    | /' "$ENTRY" ;;
    uki)
        for d in "$ESP/loader/addons" "$UKI.extra.d"; do [ -d "$d" ] && echo "$d" >>"$OUT/dirs-there"; done
        line "directories there before: $(cat "$OUT/dirs-there" 2>/dev/null | tr '\n' ' ')"
        mkdir -p "$ESP/loader/addons" "$UKI.extra.d"
        ukify build --cmdline='quiet2=1' --output="$ESP/loader/addons/cs-probe.addon.efi" >"$OUT/ukify.1" 2>&1; rc=$?
        sed 's/^/    | /' "$OUT/ukify.1"
        check "ukify build --cmdline='quiet2=1' --output=ESP/loader/addons/cs-probe.addon.efi: exit 0" [ "$rc" = 0 ]
        ukify build --cmdline='quiet3=1' --output="$UKI.extra.d/cs-probe.addon.efi" >"$OUT/ukify.2" 2>&1; rc=$?
        sed 's/^/    | /' "$OUT/ukify.2"
        check "ukify build --cmdline='quiet3=1' --output=<uki>.efi.extra.d/cs-probe.addon.efi: exit 0" [ "$rc" = 0 ]
        info "the global addon, ukify inspect:"
        ukify inspect "$ESP/loader/addons/cs-probe.addon.efi" 2>&1 | head -n 30 | sed 's/^/    | /' ;;
    grub-efi)
        echo 'GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT quiet2=1"' >>/etc/default/grub
        grub-mkconfig -o /boot/grub/grub.cfg >"$OUT/mkconfig.1" 2>&1; rc=$?
        sed 's/^/    | /' "$OUT/mkconfig.1"
        check "grub-mkconfig -o /boot/grub/grub.cfg: exit 0" [ "$rc" = 0 ]
        check "grub.cfg's first kernel line has quiet2=1" eval "grep -m1 '^[[:space:]]*linux[[:space:]]' /boot/grub/grub.cfg | grep -q ' quiet2=1'" ;;
    esac
    sync
    now >"$OUT/reboot-at"
    reboot_and_resume
fi

check "the first boot's results are still there" [ -s "$OUT/cmdline.1" ]
check "the job disk was read again: /job/cpushield is there" [ -e /job/cpushield ]
check "the same loader, entry and stub as the first boot" [ "$LI|$LES|$SI" = "$(cat "$OUT/loader.1")" ]
check "the change reached /proc/cmdline: quiet2=1" has_word quiet2=1
case $KIND in
uki)
    check "the per-UKI addon too: quiet3=1" has_word quiet3=1
    info "order on the command line: $(words | grep -n 'quiet[23]=1' | tr '\n' ' ')"
    check "otherwise the same command line as the first boot" [ "$(sed 's/ quiet2=1//; s/ quiet3=1//' /proc/cmdline)" = "$(cat "$OUT/cmdline.1")" ] ;;
*)
    check "otherwise the same command line as the first boot" [ "$(sed 's/ quiet2=1//' /proc/cmdline)" = "$(cat "$OUT/cmdline.1")" ] ;;
esac
case $KIND in
sdboot) sed -i '/^options quiet2=1$/d' "$ENTRY" ;;
uki)
    rm -f "$ESP/loader/addons/cs-probe.addon.efi" "$UKI.extra.d/cs-probe.addon.efi"
    for d in "$ESP/loader/addons" "$UKI.extra.d"; do grep -qxF "$d" "$OUT/dirs-there" 2>/dev/null || rmdir "$d"; done ;;
grub-efi)
    sed -i '$d' /etc/default/grub
    grub-mkconfig -o /boot/grub/grub.cfg >"$OUT/mkconfig.2" 2>&1; rc=$?
    check "grub-mkconfig without the line: exit 0" [ "$rc" = 0 ] ;;
esac
files >"$OUT/files.2"
if cmp -s "$OUT/files.1" "$OUT/files.2"; then
    check "undone: the files are byte-identical to the first boot's (sha256) and the ESP lists the same" true
else
    diff "$OUT/files.1" "$OUT/files.2" | sed 's/^/    /'
    check "undone: the files are byte-identical to the first boot's (sha256) and the ESP lists the same" false
fi
info "boot times: $(tr '\n' ';' <"$OUT/boot-times")"
result
