#!/usr/bin/env bash
# cpushield's real-kernel test bed: boots a disposable QEMU guest (software
# emulation) with a Debian kernel and runs scenarios inside it.  Nothing is
# changed on this machine: every shield, IRQ, cgroup and tunable change
# happens inside the guest.
#
#   tests/vm/run.sh [options] [SCENARIO...]     run scenarios (default: all)
#   tests/vm/run.sh --shell [--kernel 6.12]     interactive shell in a guest
#
# Options:
#   --kernel 6.1|6.12|7|all kernel(s) to boot (default: all = 6.1,6.12; --shell: 6.12;
#                           7: the newest 7.x of trixie-backports, Debian 14's series)
#   --cpus N                vCPUs (default 4; a scenario may ask for more)
#   --mem MB                guest memory (default 1024)
#   --machine pc|q35        QEMU machine type (default pc: i440fx, conventional
#                           PCI with latency timers; q35: PCI Express, with the
#                           virtio NIC behind a pcie-root-port so it has a link)
#   --binary PATH           static cpushield binary (default: build one)
#   --no-build              use the default binary as already built
#   --batch                 run the scenarios of a kernel in one boot each
#                           (faster; they share one guest) — default in CI
#   --separate              one boot per scenario (default)
#   --timeout SEC           limit per boot (default 120 s + 90 s per scenario)
#   --append ARGS           extra kernel command line (e.g. isolcpus=3)
#   --tcg single|multi      QEMU's TCG threading (default single: with one
#                           host thread per vCPU, 6.12 guests oopsed on int3
#                           while patching jump labels, most on busy hosts)
#   --verbose               stream the guest console
#   --export DIR            also copy the files scenarios export (reports,
#                           plots) to DIR/<kernel>/<scenario>/ (they are
#                           always kept in work/<run>/export/)
#   --refresh               re-resolve and re-download the kernels
#   --list                  list the scenarios
# SCENARIO: a name or prefix under tests/vm/scenarios (e.g. 01, 04-undo) or
# tests/vm/probes (kernel-facts: raw kernel behaviour, printed as notes).
# A guest that crashes (an oops of the emulated kernel) or dies before a
# scenario starts is booted again, up to 3 boots; the summary says so.
# Exit status: 0 all passed (or skipped), 1 a scenario failed, 3 a boot
# failure (the guest died before a scenario started, 3 times), 2 usage/set-up.
set -euo pipefail
. "$(dirname "$0")/lib/common.sh"
. "$VM_DIR/lib/fetch.sh"
. "$VM_DIR/lib/initramfs.sh"

KERNELS=""; CPUS=4; MEM=1024; MACHINE=${VM_MACHINE:-pc}; BINARY=""; BUILD=1; SHELL_MODE=0; BATCH=0
TIMEOUT=""; APPEND=""; VERBOSE=0; TCG_THREAD=${VM_TCG:-single}; ATTEMPTS=3; SCENARIOS=(); EXPORT_TO=""
while [ $# -gt 0 ]; do
    case $1 in
        --kernel) KERNELS=$2; shift ;;
        --cpus) CPUS=$2; shift ;;
        --mem) MEM=$2; shift ;;
        --machine) MACHINE=$2; shift ;;
        --binary) BINARY=$2; shift ;;
        --no-build) BUILD=0 ;;
        --shell) SHELL_MODE=1 ;;
        --batch) BATCH=1 ;;
        --separate) BATCH=0 ;;
        --timeout) TIMEOUT=$2; shift ;;
        --append) APPEND=$2; shift ;;
        --tcg) TCG_THREAD=$2; shift ;;
        --verbose|-v) VERBOSE=1 ;;
        --export) EXPORT_TO=$2; shift ;;
        --refresh) export VM_REFRESH=1 ;;
        --list) for f in "$VM_DIR"/scenarios/*.sh "$VM_DIR"/probes/*.sh; do
                    printf '%-22s %s\n' "$(basename "$f" .sh)" "$(sed -n 's/^# summary: //p' "$f")"
                done; exit 0 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        -*) die "unknown option $1 (see --help)" ;;
        *) SCENARIOS+=("$1") ;;
    esac
    shift
done
if [ -z "$KERNELS" ]; then
    if [ $SHELL_MODE = 1 ]; then KERNELS=6.12; else KERNELS=all; fi
fi
[ "$KERNELS" = all ] && KERNELS="6.1,6.12"
KERNELS=${KERNELS//,/ }
case $TCG_THREAD in single|multi) ;; *) die "--tcg takes single or multi, not '$TCG_THREAD'" ;; esac
case $MACHINE in pc|q35) ;; *) die "--machine takes pc or q35, not '$MACHINE'" ;; esac

need_cmd qemu-system-x86_64 busybox dpkg apt-get xz timeout
mkdir -p "$CACHE_DIR" "$WORK_DIR"

# ---- the binary under test
if [ -z "$BINARY" ]; then
    BTARGET=${CARGO_TARGET_DIR:-$REPO_DIR/target}
    BINARY=$BTARGET/x86_64-unknown-linux-gnu/release/cpushield
    if [ $BUILD = 1 ]; then
        log "building static cpushield (cargo build --release, crt-static)"
        (cd "$REPO_DIR" && export RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static" \
            && cargo build --quiet --release --target x86_64-unknown-linux-gnu --workspace --bins) || die "cargo build failed"
    fi
fi
[ -x "$BINARY" ] || die "no binary at $BINARY"
if ! file "$BINARY" 2>/dev/null | grep -q 'statically linked\|static-pie'; then
    case $(file "$BINARY" 2>/dev/null) in
        *dynamically*) log "warning: $BINARY is dynamically linked; the guest has no libc for it" ;;
    esac
fi

# ---- scenarios
scenario_files=()
if [ ${#SCENARIOS[@]} -eq 0 ] && [ $SHELL_MODE = 0 ]; then
    for f in "$VM_DIR"/scenarios/[0-9]*.sh; do scenario_files+=("$f"); done
else
    for s in "${SCENARIOS[@]}"; do
        f=$(ls "$VM_DIR"/scenarios/"$s".sh "$VM_DIR"/probes/"$s".sh 2>/dev/null | head -n1 || true)
        [ -n "$f" ] || f=$(ls "$VM_DIR"/scenarios/"$s"*.sh "$VM_DIR"/probes/"$s"*.sh 2>/dev/null | head -n1 || true)
        [ -n "$f" ] || die "no scenario '$s' (see --list)"
        scenario_files+=("$f")
    done
fi
# header: "# vm: cgroup=v1 cpus=4 kernels=6.1 boot=isolated"
# kernels= the kernels (as --kernel names them) the scenario runs on: where
# the others add nothing but time.
# boot=isolated boots with the line 'cpushield boot-args 2-3' prints,
# boot=domain with the older one that has isolcpus' domain flag.
hdr() { sed -n 's/^# vm: //p' "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | head -n1; }

# The pid too: CI's two lanes can start a run in the same second.
RUN_ID=$(date +%Y%m%d-%H%M%S)-$$
RUN_DIR=$WORK_DIR/$RUN_ID
mkdir -p "$RUN_DIR"
OVERLAY=$RUN_DIR/overlay.cpio
overlay_initramfs "$BINARY" "$OVERLAY"

# collect_export LOG KERNEL: files the guest exported (guest/init:
# export_results) are read from the scratch disk image into
# $RUN_DIR/export/KERNEL/, then that area is zeroed for the next boot.
EXPORT_OFFSET_MB=32
collect_export() {
    local logf=$1 k=$2 n disk=$RUN_DIR/scratch.img dest=$RUN_DIR/export/$2
    n=$(sed -n 's/^CPUSHIELD-EXPORT: \([0-9]*\) bytes.*/\1/p' "$logf" | tail -n1)
    [ -n "$n" ] && [ -f "$disk" ] || return 0
    mkdir -p "$dest"
    # a file in between, not a pipe: under pipefail a reader that stops
    # early would fail the writer with SIGPIPE
    dd if="$disk" of="$RUN_DIR/export.tmp" bs=1M skip=$EXPORT_OFFSET_MB \
        count=$(( (n + 1048575) / 1048576 )) 2>/dev/null
    truncate -s "$n" "$RUN_DIR/export.tmp"
    if tar -xzf "$RUN_DIR/export.tmp" -C "$dest"; then
        log "exported files: $dest ($n bytes)"
    else
        log "warning: could not read the exported files back from $disk"
    fi
    rm -f "$RUN_DIR/export.tmp"
    dd if=/dev/zero of="$disk" bs=1M seek=$EXPORT_OFFSET_MB count=1 conv=notrunc 2>/dev/null
}

# boot_line isolated|domain|"" -> the extra kernel command line of a scenario's boot
boot_line() {
    case $1 in
        isolated) echo "isolcpus=managed_irq,2-3 nohz_full=2-3 rcu_nocbs=2-3 irqaffinity=0-1" ;;
        domain) echo "isolcpus=nohz,domain,managed_irq,2-3 nohz_full=2-3 rcu_nocbs=2-3 irqaffinity=0-1" ;;
        threadirqs) echo "threadirqs" ;;
        "") ;;
        *) die "boot=$1: isolated, domain or threadirqs" ;;
    esac
}

# boot KERNEL_DIR CPUS CGROUP SCENARIOS(comma) LOG [BOOT] -> runs qemu; returns qemu's status
boot() {
    local kdir=$1 cpus=$2 cg=$3 scen=$4 logf=$5 bootkind=${6:-} initrd disk rc
    initrd=$RUN_DIR/initrd-$(basename "$kdir").cpio
    if [ ! -f "$initrd" ]; then
        # a failure inside $(...) does not stop the script: without this
        # check a missing guest tool gave an initrd without /bin/sh, and
        # every boot died with "Failed to execute /init (error -2)"
        local base
        base=$(base_initramfs "$kdir") && [ -s "$base" ] \
            || die "could not build the base initramfs for $kdir (are the guest tools installed? tests/vm/ci.sh --install-only)"
        cat "$base" "$OVERLAY" >"$initrd"
    fi
    disk=$RUN_DIR/scratch.img
    [ -f "$disk" ] || truncate -s 64M "$disk"
    local cmdline="console=ttyS0 panic=-1 quiet loglevel=4 cpushield.cgroup=$cg"
    [ -n "$scen" ] && cmdline="$cmdline cpushield.scenarios=$scen"
    [ "$SHELL_MODE" = 1 ] && cmdline="$cmdline cpushield.shell=1"
    [ -n "$APPEND" ] && cmdline="$cmdline $APPEND"
    [ -n "$bootkind" ] && cmdline="$cmdline $(boot_line "$bootkind")"
    # pc (the default) is QEMU's i440fx with its conventional PCI bus, as
    # every scenario was written for; q35 has PCI Express, and its NIC sits
    # behind a root port so that a link (and its ASPM registers) exists.
    local machine=() nic_bus=""
    if [ "$MACHINE" = q35 ]; then
        machine=(-machine q35 -device pcie-root-port,id=rp1,chassis=1,slot=1)
        nic_bus=",bus=rp1"
    fi
    local qemu=(qemu-system-x86_64 "${machine[@]}" -accel "tcg,thread=$TCG_THREAD" -cpu "$QEMU_CPU"
        -smp "$cpus" -m "$MEM" -nographic -no-reboot -vga none
        -kernel "$kdir/vmlinuz" -initrd "$initrd" -append "$cmdline"
        -drive "file=$disk,if=none,id=d0,format=raw,cache=unsafe"
        -device virtio-blk-pci,drive=d0
        -netdev user,id=n0 -device "virtio-net-pci,netdev=n0,romfile=$nic_bus")
    if [ "$SHELL_MODE" = 1 ]; then
        exec "${qemu[@]}"
    fi
    local limit=${TIMEOUT:-$(( 120 + 90 * $(echo "$scen" | tr ',' '\n' | wc -l) ))}
    BOOT_LIMIT=$limit
    set +e
    if [ $VERBOSE = 1 ]; then
        timeout -k 5 "$limit" "${qemu[@]}" </dev/null 2>&1 | tr -d '\r' | tee "$logf"
        rc=${PIPESTATUS[0]}
    else
        timeout -k 5 "$limit" "${qemu[@]}" </dev/null 2>&1 | tr -d '\r' >"$logf"
        rc=${PIPESTATUS[0]}
    fi
    set -e
    return $rc
}

if [ $SHELL_MODE = 1 ]; then
    k=${KERNELS%% *}
    kdir=$(fetch_kernel "$k")
    log "interactive guest: kernel $(cat "$kdir/release"), $CPUS vCPUs; leave with 'poweroff -f' (or Ctrl-A x)"
    boot "$kdir" "$CPUS" "${VM_CGROUP:-v2}" "" /dev/null
fi

# ---- plan the boots: per kernel, scenarios grouped by their guest set-up
declare -a BOOT_K BOOT_CPUS BOOT_CG BOOT_SCEN BOOT_LINE
for k in $KERNELS; do
    for f in "${scenario_files[@]}"; do
        name=$(basename "$f" .sh)
        ks=$(hdr "$f" kernels)
        if [ -n "$ks" ] && [[ ",$ks," != *",$k,"* ]]; then
            log "$name runs on kernels $ks only: not on $k"
            continue
        fi
        c=$(hdr "$f" cpus); c=${c:-$CPUS}
        g=$(hdr "$f" cgroup); g=${g:-v2}
        b=$(hdr "$f" boot)
        placed=0
        if [ $BATCH = 1 ]; then
            for i in "${!BOOT_K[@]}"; do
                if [ "${BOOT_K[$i]}" = "$k" ] && [ "${BOOT_CPUS[$i]}" = "$c" ] && [ "${BOOT_CG[$i]}" = "$g" ] && [ "${BOOT_LINE[$i]}" = "$b" ]; then
                    BOOT_SCEN[$i]="${BOOT_SCEN[$i]},$name"; placed=1; break
                fi
            done
        fi
        if [ $placed = 0 ]; then
            BOOT_K+=("$k"); BOOT_CPUS+=("$c"); BOOT_CG+=("$g"); BOOT_SCEN+=("$name"); BOOT_LINE+=("$b")
        fi
    done
done

declare -A KDIR CRASHED
for k in $KERNELS; do KDIR[$k]=$(fetch_kernel "$k"); done

SUMMARY=$RUN_DIR/summary.txt
# failed_recap SCEN RESULT LOG: the result and the scenario's failed checks
# (at most 12) kept for the recap printed last, where a log cut to its
# tail still shows what failed (and appended to $CPUSHIELD_FAILED_RECAP
# when set: CI prints it after both lanes)
failed_recap() {
    { echo "$1: $2"
      awk -v s="$1" '$0 ~ "^CPUSHIELD-SCENARIO-START: " s {p=1} p && /^CPUSHIELD-CHECK: FAIL/ {print "  " $0} p && /^CPUSHIELD-RESULT:/ {exit}' "$3" | head -n 12
    } | tee -a "${CPUSHIELD_FAILED_RECAP:-/dev/null}" >>"$RUN_DIR/failed.txt"
}
: >"$SUMMARY"
NOTES=$RUN_DIR/notes.txt
: >"$NOTES"
status=0
for i in "${!BOOT_K[@]}"; do
    k=${BOOT_K[$i]}; kdir=${KDIR[$k]}; todo=${BOOT_SCEN[$i]}
    for attempt in $(seq 1 $ATTEMPTS); do
        tag=${todo%%,*}; [ "$todo" != "$tag" ] && tag="$tag+"
        logf=$RUN_DIR/$k-$tag-try$attempt.log
        log "boot $k ($(cat "$kdir/release")), machine $MACHINE, ${BOOT_CPUS[$i]} vCPUs, cgroup ${BOOT_CG[$i]}${BOOT_LINE[$i]:+, boot line ${BOOT_LINE[$i]}}: $todo"
        t0=$(date +%s)
        qrc=0
        boot "$kdir" "${BOOT_CPUS[$i]}" "${BOOT_CG[$i]}" "$todo" "$logf" "${BOOT_LINE[$i]}" || qrc=$?
        secs=$(( $(date +%s) - t0 ))
        grep '^CPUSHIELD-NOTE:' "$logf" | sed "s/^CPUSHIELD-NOTE: //" >>"$NOTES" || true
        collect_export "$logf" "$k"
        retry=""
        for s in ${todo//,/ }; do
            if ! grep -q "^CPUSHIELD-SCENARIO-START: $s" "$logf"; then
                retry="$retry,$s"
                continue
            fi
            r=$(grep "^CPUSHIELD-RESULT: [A-Z]* $s\b" "$logf" | tail -n1 | sed 's/^CPUSHIELD-RESULT: //' || true)
            if [ -z "$r" ]; then
                why="guest ended without a result"
                [ $qrc = 124 ] && why="timed out: the boot's limit is ${BOOT_LIMIT}s"
                oops=$(awk -v s="$s" '$0 ~ "^CPUSHIELD-SCENARIO-START: " s {p=1} p' "$logf" \
                    | grep -m1 -E 'Oops|Kernel panic|BUG:|general protection' || true)
                if [ -n "$oops" ]; then
                    why="the guest kernel crashed during the scenario: ${oops#*] }"
                    # a crash of the emulated kernel (TCG flakes happen, see
                    # TESTBED.md): retried in a fresh boot, and said so
                    if [ $attempt -lt $ATTEMPTS ]; then
                        CRASHED[$s]="${CRASHED[$s]:+${CRASHED[$s]}; }$why ($logf)"
                        retry="$retry,$s"
                        log "$k $s: $why; retrying in a fresh boot"
                        continue
                    fi
                fi
                r="FAIL $s ($why)"
            fi
            [ -n "${CRASHED[$s]:-}" ] && r="$r [earlier tries: ${CRASHED[$s]}]"
            # the scenario's own time in the guest, so CI's budget can be read per scenario
            took=$(sed -n "s/^CPUSHIELD-TIME: $s \([0-9.]*s\)\$/\1/p" "$logf" | tail -n1)
            printf '%-5s %-22s %7s %s\n' "$k$([ "$MACHINE" = pc ] || echo "/$MACHINE")" "$s" "${took:--}" "$r" | tee -a "$SUMMARY"
            case $r in
                PASS*|SKIP*) ;;
                *) status=1
                   echo "---- guest output of $s on $k ($logf):"
                   awk -v s="$s" '$0 ~ "^CPUSHIELD-SCENARIO-START: " s {p=1} p {print} p && /^CPUSHIELD-RESULT:/ {exit}' "$logf" | sed 's/^/  /'
               failed_recap "$s" "$k$([ "$MACHINE" = pc ] || echo "/$MACHINE") $r" "$logf"
                   echo "----" ;;
            esac
        done
        log "boot took ${secs}s (qemu exit $qrc)"
        retry=${retry#,}
        [ -z "$retry" ] && break
        if [ $attempt -lt $ATTEMPTS ]; then
            log "retrying in a fresh boot: $retry"
            echo "---- tail of $logf:"; tail -n 15 "$logf" | sed 's/^/  /'
            todo=$retry
        else
            for s in ${retry//,/ }; do
                printf '%-5s %-22s %7s %s\n' "$k$([ "$MACHINE" = pc ] || echo "/$MACHINE")" "$s" - "BOOT FAILURE (the guest died before the scenario started, $ATTEMPTS times; see $logf)" | tee -a "$SUMMARY"
                failed_recap "$s" "$k BOOT FAILURE (see $logf)" "$logf"
            done
            echo "---- tail of $logf:"; tail -n 30 "$logf" | sed 's/^/  /'
            [ $status = 0 ] && status=3
        fi
    done
done

if [ -d "$RUN_DIR/export" ] && [ -n "$EXPORT_TO" ]; then
    mkdir -p "$EXPORT_TO"
    cp -r "$RUN_DIR/export/." "$EXPORT_TO/"
    log "exported files copied to $EXPORT_TO"
fi
# keep the logs, drop the images; keep the last 20 runs
rm -f "$RUN_DIR"/*.cpio "$RUN_DIR"/scratch.img
ls -1d "$WORK_DIR"/[0-9]*-[0-9]*/ 2>/dev/null | head -n -20 | xargs -r rm -rf
echo "==== summary ($RUN_DIR)"
cat "$SUMMARY"
if [ -s "$NOTES" ]; then
    echo "==== kernel behaviour noted by the scenarios"
    sort -u "$NOTES"
fi
if [ -s "$RUN_DIR/failed.txt" ]; then echo "==== what failed (each scenario's failed checks)"; cat "$RUN_DIR/failed.txt"; fi
npass=$(grep -c ' PASS ' "$SUMMARY" || true); nfail=$(grep -cv ' PASS \| SKIP ' "$SUMMARY" || true)
nskip=$(grep -c ' SKIP ' "$SUMMARY" || true)
echo "vm: $npass passed, $nfail failed, $nskip skipped"
exit $status
