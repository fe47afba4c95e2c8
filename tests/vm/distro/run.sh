#!/usr/bin/env bash
# The distribution test bed: boots a Debian system with systemd, irqbalance
# and tuned (tests/vm/distro/image.sh) in a disposable QEMU guest and runs
# scenarios from tests/vm/distro/scenarios there, one boot per suite and
# cgroup layout. Nothing is changed on this machine: the image is booted
# with -snapshot, every shield exists only inside the guest.
#
#   tests/vm/distro/run.sh [options] [SCENARIO...]   (default: all)
# Options:
#   --suite bookworm|trixie|trixie-rt|trixie-k8s|trixie-crio|trixie-k8s2|forky|all
#                                (default all: bookworm and trixie; trixie-rt, Debian 13 with
#                                PREEMPT_RT, trixie-k8s, Debian 13 as a Kubernetes
#                                node (kubelet, containerd; ../k8s/), trixie-crio,
#                                the same node on CRI-O (../k8s/crio/), trixie-k8s2,
#                                the same node on containerd 2.x (../k8s/containerd2/),
#                                and forky, Debian 14, run only when named)
#   --binary PATH                static cpushield (default: the release build)
#   --deb PATH                   the package (packaging/build-deb.sh; default:
#                                the newest under target/debian)
#   --cpus N                     vCPUs (default 4)
#   --set NAME=VALUE             a setting exported to the scenarios (repeatable)
#   --memory MB                  guest memory (default 1536)
#   --append 'OPTIONS'           more kernel options for the guests booted
#                                with -kernel (e.g. the boot half's line)
#   --packages LIST              more packages in the image, comma-separated
#                                (a separate cached image; see image.sh)
#   --timeout SEC                limit per QEMU run (default 200 + 240 per
#                                scenario (or its header's time=SEC), + 300 per
#                                reboot a scenario asks for)
#   --tcg single|multi           QEMU's TCG threading (default single: every
#                                vCPU on one host thread, see ../README.md).
#                                With nohz_full on the command line and a
#                                vCPU spinning in user space, single
#                                slows the other vCPUs twentyfold (KERNEL-NOTES 38):
#                                use multi there
#   --verbose                    stream the guest console
# A scenario's header may say "# distro: cgroup=v1 suites=bookworm reboot=yes"
# (reboot=yes: the scenario reboots the guest and goes on in the next boot
# of the same disk; its boot then runs without -no-reboot; boots=N: it
# takes N boots in all, for the time limit, default 2). boot=grub: the
# guest boots from the disk through SeaBIOS and GRUB (image.sh --grub), no
# -kernel: GRUB's own grub.cfg makes the kernel command line, so changes
# the guest makes there (update-grub) take effect at its next reboot
# (cgroup v2 only). boot=sdboot, boot=uki, boot=grub-efi: the same through
# UEFI (OVMF; image.sh --uefi KIND): systemd-boot with a BLS type #1
# entry, systemd-boot with a UKI, or GRUB EFI; each QEMU run boots with a
# copy of its own of the image's OVMF_VARS.fd, kept in the run's directory,
# and a reboot there is a power cycle: QEMU exits and starts again on the
# same NVRAM and a copy of the disk of the run's own (OVMF hangs after some
# warm resets under TCG; CPUSHIELD_UEFI_WARM_REBOOT=1 reboots inside QEMU)
# (cgroup v2 only; the machine type is CPUSHIELD_UEFI_MACHINE, default pc).
# Without suites=, a scenario is for any suite. default-suites=LIST: in
# the default set (no scenario named, as CI runs it) only on these suites;
# named, on any of suites= (CI's time).
# time=SEC: the seconds the scenario's boot may take beyond 200 (default 240;
# the Kubernetes node's boot alone takes 3-4 minutes under TCG).
# A guest line "CPUSHIELD-MONITOR: device_add ..." (or device_del) runs
# that command in the guest's QEMU monitor (a device hot-added while a
# scenario runs); each once, logged here.
# default=no: the scenario runs only when named (not in the default set,
# so not in tests/vm/ci.sh either).
# Exit status: 0 all passed (or skipped), 1 a scenario failed, 3 a boot failed
# twice, 2 usage or set-up.
set -euo pipefail
. "$(dirname "$0")/../lib/common.sh"
D_DIR=$VM_DIR/distro
TCG_THREAD=single; SUITES=all; BINARY=""; DEB=""; EXTRA_APPEND=""; PACKAGES=""; SETTINGS=""; MEMORY=1536; CPUS=4; TIMEOUT=""; VERBOSE=0; SCENARIOS=()
while [ $# -gt 0 ]; do
    case $1 in
        --suite) SUITES=$2; shift ;;
        --binary) BINARY=$2; shift ;;
        --deb) DEB=$2; shift ;;
        --cpus) CPUS=$2; shift ;;
        --packages) PACKAGES=$2; shift ;;
        --set) case $2 in [A-Z_]*=*) ;; *) die "--set $2: NAME=VALUE expected" ;; esac
               SETTINGS="$SETTINGS$2"$'\n'; shift ;;
        --memory) MEMORY=$2; shift ;;
        --append) EXTRA_APPEND=$2; shift ;;
        --timeout) TIMEOUT=$2; shift ;;
        --tcg) case $2 in single|multi) TCG_THREAD=$2 ;; *) die "--tcg takes single or multi, not '$2'" ;; esac; shift ;;
        --verbose|-v) VERBOSE=1 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        -*) die "unknown option $1 (see --help)" ;;
        *) SCENARIOS+=("$1") ;;
    esac
    shift
done
[ "$SUITES" = all ] && SUITES="bookworm trixie"
SUITES=${SUITES//,/ }
need_cmd qemu-system-x86_64 tar timeout
BINARY=${BINARY:-${CARGO_TARGET_DIR:-$REPO_DIR/target}/x86_64-unknown-linux-gnu/release/cpushield}
[ -x "$BINARY" ] || die "no static cpushield at $BINARY (build it: see tests/vm/ci.sh)"
DEB=${DEB:-$(ls -t "${CARGO_TARGET_DIR:-$REPO_DIR/target}"/debian/cpushield_*.deb 2>/dev/null | head -n1 || true)}

files=()
hdr() { sed -n 's/^# distro: //p' "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | head -n1; }
BY_NAME=""
if [ ${#SCENARIOS[@]} -eq 0 ]; then
    for f in "$D_DIR"/scenarios/[0-9]*.sh; do
        if [ "$(hdr "$f" default)" = no ]; then BY_NAME="$BY_NAME $(basename "$f" .sh)"; continue; fi
        files+=("$f")
    done
else
    for s in "${SCENARIOS[@]}"; do
        f=$(ls "$D_DIR"/scenarios/"$s"*.sh "$D_DIR"/probes/"$s"*.sh 2>/dev/null | head -n1 || true)
        [ -n "$f" ] || die "no distro scenario '$s'"
        files+=("$f")
    done
fi

# one directory per run, also for two runs started in the same second
mkdir -p "$WORK_DIR"
RUN_DIR=$(mktemp -d "$WORK_DIR/distro-$(date +%Y%m%d-%H%M%S)-XXXX")
SUMMARY=$RUN_DIR/summary.txt; : >"$SUMMARY"
# failed_recap SCEN RESULT LOG: the result and the scenario's failed checks
# (at most 12) kept for the recap printed last, where a log cut to its
# tail still shows what failed (and appended to $CPUSHIELD_FAILED_RECAP
# when set: CI prints it after both lanes)
failed_recap() {
    { echo "$1: $2"
      awk -v s="$1" '$0 ~ "^CPUSHIELD-SCENARIO-START: " s {p=1} p && /^CPUSHIELD-CHECK: FAIL/ {print "  " $0} p && /^CPUSHIELD-RESULT:/ {exit}' "$3" | head -n 12
    } | tee -a "${CPUSHIELD_FAILED_RECAP:-/dev/null}" >>"$RUN_DIR/failed.txt"
}
for s in $BY_NAME; do printf '%-9s %-24s %s\n' - "$s" "SKIP $s (default=no: runs when named, tests/vm/distro/run.sh $s)" >>"$SUMMARY"; done
NOTES=$RUN_DIR/notes.txt; : >"$NOTES"
status=0

# monitor_requests LOG PORT: runs the QEMU monitor commands the guest asks
# for (lines "CPUSHIELD-MONITOR: CMD" on its console), in order, once each;
# only device_add and device_del with plain arguments. Ends when killed.
monitor_requests() {
    local logf=$1 port=$2 handled=0 n cmd
    while sleep 0.2; do
        n=$(grep -c '^CPUSHIELD-MONITOR: ' "$logf" 2>/dev/null) || n=0
        while [ "$handled" -lt "$n" ]; do
            handled=$((handled + 1))
            cmd=$(grep '^CPUSHIELD-MONITOR: ' "$logf" | sed -n "${handled}s/^CPUSHIELD-MONITOR: //p")
            if ! [[ $cmd =~ ^device_(add|del)\ [A-Za-z0-9,=_.-]+$ ]]; then
                log "QEMU monitor: refused the guest's request '$cmd' (device_add or device_del only)"
            elif exec 9<>"/dev/tcp/127.0.0.1/$port"; then
                printf '%s\n' "$cmd" >&9; sleep 1; exec 9>&-
                log "QEMU monitor: $cmd (asked by the guest)"
            else
                log "QEMU monitor: port $port unreachable for the guest's request '$cmd'"
            fi
        done
    done
}

# boot SUITE CGROUP "SCENARIOS" -> one guest running them in order
# (CGROUP v2, v1, or grub: v2, booted from the disk through GRUB)
boot() {
    local suite=$1 cg=$2 scen=$3 img job res logf append rc limit n grub="" uefi="" imgopt
    [ "$cg" = grub ] && grub=--grub
    case $cg in sdboot|uki|grub-efi) uefi=$cg ;; esac
    imgopt=$grub
    [ -n "$uefi" ] && imgopt="--uefi $uefi"
    img=$(bash "$D_DIR/image.sh" $imgopt "$suite" "$PACKAGES" | tail -n1)
    [ -f "$img/root.img" ] || die "no $suite image (tests/vm/distro/image.sh $imgopt $suite)"
    job=$RUN_DIR/job-$suite-$cg
    rm -rf "$job"; mkdir -p "$job/scenarios"
    cp "$BINARY" "$job/cpushield"
    [ -n "$DEB" ] && cp "$DEB" "$job/cpushield.deb"
    cp "$D_DIR/guest/"* "$VM_DIR/guest/snapshot.sh" "$VM_DIR/guest/compare.sh" "$job/"
    for s in $scen; do cp "$(ls "$D_DIR"/scenarios/$s.sh "$D_DIR"/probes/$s.sh 2>/dev/null | head -n1)" "$job/scenarios/"; done
    echo "$scen" >"$job/order"
    printf '%s' "$SETTINGS" | sed -n "s/^\([A-Z_][A-Z0-9_]*\)=\(.*\)/export \1='\2'/p" >"$job/env"
    local tools; tools=$(dirname "$BINARY")
    [ -x "$tools/idle_tasks" ] && cp "$tools/idle_tasks" "$job/"
    [ -x "$tools/interfere" ] && cp "$tools/interfere" "$job/"
    tar -cf "$RUN_DIR/job.tar" -C "$job" .
    res=$RUN_DIR/results.img
    rm -f "$res"; truncate -s 64M "$res"
    append="root=/dev/vda rw console=ttyS0 panic=-1 quiet loglevel=3 systemd.show_status=0"
    [ "$cg" = v1 ] && append="$append systemd.unified_cgroup_hierarchy=0"
    [ -n "$EXTRA_APPEND" ] && append="$append $EXTRA_APPEND"
    # A guest reboots only when a scenario asks for it (reboot=yes);
    # otherwise a reboot (a panic) ends QEMU.
    # 300 s more for each boot after the first.
    local reboot=-no-reboot more=0 f b per=0 t
    for s in $scen; do
        f=$(ls "$D_DIR"/scenarios/$s.sh "$D_DIR"/probes/$s.sh 2>/dev/null | head -n1 || true)
        t=$(hdr "$f" time); per=$(( per + ${t:-240} ))
        [ "$(hdr "$f" reboot)" = yes ] || continue
        reboot=""; b=$(hdr "$f" boots); more=$(( more + ${b:-2} - 1 ))
    done
    limit=${TIMEOUT:-$(( 200 + per + 300 * more ))}
    logf=$RUN_DIR/$suite-$cg.log
    # -snapshot keeps the guest's changes to its disk across its reboots,
    # until QEMU exits; through GRUB, SeaBIOS boots the root disk (bootindex)
    local rootdisk=(-drive "file=$img/root.img,if=virtio,format=raw,snapshot=on,cache=unsafe")
    local kernel=(-kernel "$img/vmlinuz" -initrd "$img/initrd.img" -append "$append")
    if [ -n "$grub" ] || [ -n "$uefi" ]; then
        rootdisk=(-drive "file=$img/root.img,if=none,id=root,format=raw,snapshot=on,cache=unsafe"
            -device virtio-blk-pci,drive=root,bootindex=0)
        kernel=()
    fi
    # UEFI: OVMF's code read-only, and a copy of the image's NVRAM for this
    # boot (kept across the guest's reboots, never written back). A guest
    # reboot is a power cycle: OVMF 2022.11 under QEMU 7.2's TCG hung in
    # the firmware after 3 of 11 warm resets and crawled for 215 s after a
    # fourth (../README.md), so QEMU runs with -no-reboot, and when the
    # kernel said "reboot: Restarting system" and the scenarios asked for
    # more boots, QEMU starts again on the same NVRAM and on a copy of the
    # disk of this boot's own (-snapshot would lose the changes when QEMU
    # exits). CPUSHIELD_UEFI_WARM_REBOOT=1: reboots inside one QEMU run
    # instead, with -snapshot, as for the other layouts.
    local firmware=() cold=""
    if [ -n "$uefi" ]; then
        [ -f "$OVMF_CODE" ] || die "no OVMF at $OVMF_CODE (apt-get install ovmf)"
        cp "$img/OVMF_VARS.fd" "$RUN_DIR/OVMF_VARS-$suite-$cg.fd"
        firmware=(-machine "$UEFI_MACHINE"
            -drive "if=pflash,format=raw,unit=0,readonly=on,file=$OVMF_CODE"
            -drive "if=pflash,format=raw,unit=1,file=$RUN_DIR/OVMF_VARS-$suite-$cg.fd")
        if [ "${CPUSHIELD_UEFI_WARM_REBOOT:-0}" != 1 ] && [ -z "$reboot" ]; then
            cold=$RUN_DIR/root-$suite-$cg.img
            cp --sparse=always "$img/root.img" "$cold"
            rootdisk=(-drive "file=$cold,if=none,id=root,format=raw,cache=unsafe"
                -device virtio-blk-pci,drive=root,bootindex=0)
            reboot=-no-reboot
        fi
    fi
    # the QEMU monitor, for the devices a scenario hot-adds (monitor_requests)
    local monport=$(( 20000 + RANDOM % 20000 ))
    local qemu=(qemu-system-x86_64 -accel "tcg,thread=$TCG_THREAD" -cpu "$QEMU_CPU"
        -smp "$CPUS" -m "$MEMORY" -nographic $reboot -vga none "${firmware[@]}"
        "${kernel[@]}" "${rootdisk[@]}"
        -drive "file=$RUN_DIR/job.tar,if=virtio,format=raw,readonly=on"
        -drive "file=$res,if=virtio,format=raw,cache=unsafe"
        -netdev user,id=n0 -device virtio-net-pci,netdev=n0,romfile=
        -monitor "tcp:127.0.0.1:$monport,server=on,wait=off")
    local how="cgroup $cg"
    [ -n "$grub" ] && how="through GRUB, cgroup v2"
    [ -n "$uefi" ] && how="through UEFI ($uefi), cgroup v2"
    log "boot $suite ($(cat "$img/release")), $CPUS vCPUs, $how: $scen"
    local t0; t0=$(date +%s)
    set +e
    if [ -n "$cold" ]; then
        # UEFI, a reboot as a power cycle: QEMU again while the guest's last
        # words were the kernel's reboot and boots and time are left
        local run=1 left part
        : >"$logf"
        while :; do
            left=$(( limit - ($(date +%s) - t0) ))
            [ "$left" -gt 5 ] || { rc=124; break; }
            part=$RUN_DIR/$suite-$cg.qemu$run.log
            if [ $VERBOSE = 1 ]; then
                timeout -k 5 "$left" "${qemu[@]}" </dev/null 2>&1 | tr -d '\r' | tee "$part"; rc=${PIPESTATUS[0]}
            else
                timeout -k 5 "$left" "${qemu[@]}" </dev/null 2>&1 | tr -d '\r' >"$part"; rc=${PIPESTATUS[0]}
            fi
            cat "$part" >>"$logf"; rm -f "$part"
            [ "$rc" = 0 ] && [ $run -le "$more" ] && tail -n 3 "$logf" | grep -q 'reboot: Restarting system' || break
            log "the guest rebooted after $(( $(date +%s) - t0 ))s: QEMU again on the same disk and NVRAM (boot $((run + 1)))"
            run=$((run + 1))
        done
    else
        # line by line into the log, which monitor_requests reads as it grows
        : >"$logf"
        monitor_requests "$logf" "$monport" &
        local watcher=$!
        if [ $VERBOSE = 1 ]; then
            timeout -k 5 "$limit" "${qemu[@]}" </dev/null 2>&1 | stdbuf -oL tr -d '\r' | tee "$logf"; rc=${PIPESTATUS[0]}
        else
            timeout -k 5 "$limit" "${qemu[@]}" </dev/null 2>&1 | stdbuf -oL tr -d '\r' >"$logf"; rc=${PIPESTATUS[0]}
        fi
        kill "$watcher" 2>/dev/null; wait "$watcher" 2>/dev/null
    fi
    set -e
    [ -n "$cold" ] && rm -f "$cold"
    log "boot took $(( $(date +%s) - t0 ))s (qemu exit $rc)"
    mkdir -p "$RUN_DIR/results/$suite-$cg"
    tar -xf "$res" -C "$RUN_DIR/results/$suite-$cg" 2>/dev/null || true
    return 0
}

declare -A GROUPS_
for suite in $SUITES; do
    for f in "${files[@]}"; do
        name=$(basename "$f" .sh)
        ss=$(hdr "$f" suites); ss=${ss:-bookworm,trixie,forky}
        ds=$(hdr "$f" default-suites)
        if [ ${#SCENARIOS[@]} -eq 0 ] && [ -n "$ds" ]; then
            case ",$ds," in *",$suite,"*) ;; *) printf '%-9s %-24s %s\n' "$suite" "$name" "SKIP $name (in the default set on $ds only; named, it runs on $ss: run.sh --suite $suite $name)" >>"$SUMMARY"; continue ;; esac
        fi
        case ",$ss," in *",$suite,"*) ;; *) printf '%-9s %-24s %s\n' "$suite" "$name" "SKIP $name (not for $suite: $(sed -n 's/^# skip-why: //p' "$f"))" >>"$SUMMARY"; continue ;; esac
        cg=$(hdr "$f" cgroup); cg=${cg:-v2}
        # a guest booted through GRUB is a layout of its own (cgroup v2)
        if [ "$(hdr "$f" boot)" = grub ]; then
            [ "$cg" = v2 ] || die "$name: boot=grub is for cgroup v2 only"
            cg=grub
        fi
        # so is one booted through UEFI, one per kind of loader
        case $(hdr "$f" boot) in
            sdboot|uki|grub-efi)
                [ "$cg" = v2 ] || die "$name: boot=$(hdr "$f" boot) is for cgroup v2 only"
                cg=$(hdr "$f" boot) ;;
        esac
        GROUPS_[$suite/$cg]="${GROUPS_[$suite/$cg]:-} $name"
    done
done
for key in $(printf '%s\n' "${!GROUPS_[@]}" | sort); do
    suite=${key%/*}; cg=${key#*/}; todo=${GROUPS_[$key]}
    for attempt in 1 2; do
        boot "$suite" "$cg" "$todo"
        logf=$RUN_DIR/$suite-$cg.log
        cp "$logf" "$RUN_DIR/$suite-$cg-try$attempt.log"
        grep '^CPUSHIELD-NOTE:' "$logf" | sed "s/^CPUSHIELD-NOTE: /$suite: /" >>"$NOTES" || true
        if grep -q '^CPUSHIELD-SCENARIO-START:' "$logf" || [ $attempt = 2 ]; then break; fi
        log "the $suite guest died before its first scenario; booting again"
        tail -n 20 "$logf" | sed 's/^/  /'
    done
    for s in $todo; do
        r=$(grep "^CPUSHIELD-RESULT: [A-Z]* $s\b" "$logf" | tail -n1 | sed 's/^CPUSHIELD-RESULT: //' || true)
        if [ -z "$r" ]; then
            if grep -q "^CPUSHIELD-SCENARIO-START: $s" "$logf"; then r="FAIL $s (guest ended without a result)"
            else r="BOOT FAILURE $s (the guest died before the scenario started; $logf)"; fi
        fi
        printf '%-9s %-24s %s\n' "$suite/$cg" "$s" "$r" | tee -a "$SUMMARY"
        case $r in
            PASS*|SKIP*) ;;
            *) [ $status = 0 ] && status=1
               case $r in BOOT*) status=3 ;; esac
               echo "---- guest output of $s ($logf):"
               awk -v s="$s" '$0 ~ "^CPUSHIELD-SCENARIO-START: " s {p=1} p {print} p && /^CPUSHIELD-RESULT:/ {exit}' "$logf" | sed 's/^/  /'
               failed_recap "$s" "$suite/$cg $r" "$logf"
               echo "----" ;;
        esac
    done
done
rm -f "$RUN_DIR/job.tar" "$RUN_DIR/results.img"
ls -1d "$WORK_DIR"/distro-*/ 2>/dev/null | head -n -10 | xargs -r rm -rf
echo "==== summary ($RUN_DIR)"
cat "$SUMMARY"
if [ -s "$NOTES" ]; then echo "==== systemd behaviour noted by the scenarios"; sort -u "$NOTES"; fi
if [ -s "$RUN_DIR/failed.txt" ]; then echo "==== what failed (each scenario's failed checks)"; cat "$RUN_DIR/failed.txt"; fi
npass=$(grep -c ' PASS ' "$SUMMARY" || true); nfail=$(grep -cv ' PASS \| SKIP ' "$SUMMARY" || true)
nskip=$(grep -c ' SKIP ' "$SUMMARY" || true)
echo "distro: $npass passed, $nfail failed, $nskip skipped"
exit $status
