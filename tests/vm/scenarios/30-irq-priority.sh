#!/bin/sh
# summary: on --irq-priority on a kernel booted with threadirqs (tuna's -q IRQ -p fifo:PRIO): the threads of the IRQs a name pattern names and of one named by number run at the SCHED_FIFO priority asked, read back from /proc/PID/stat, over --kthreads-above for an IRQ bound to the shield; the other IRQs' threads stay at 50; status exit 0; a change in place to other priorities; an IRQ the kernel never threads (the timer's) and a pattern that names nothing are refused by name, nothing changed; off puts every thread back at SCHED_FIFO 50 and gives back the snapshot before on; then --irq-spread: the NIC's input and output queues bound with --irq get shielded CPUs 2 and 3 one each in IRQ order (smp_affinity_list read back), status exit 0, off gives back the snapshot
# vm: cpus=4 boot=threadirqs kernels=6.12
. /guest/lib.sh "$1"
SH=2-3
has_cpushield || { bad "cpushield binary in the guest"; result; }
# threads IRQ: the pids of IRQ's threads (irq/N-name, irq/N-s-name)
threads() {
    local p
    for p in /proc/[0-9]*; do
        case "$(cat "$p/comm" 2>/dev/null)" in "irq/$1-"*) echo "${p#/proc/}" ;; esac
    done
}
# sched PID: "POLICY PRIORITY" as the kernel reads them (1 = SCHED_FIFO)
sched() { awk '{ print $41, $40 }' "/proc/$1/stat" 2>/dev/null; }
# all_at IRQ "POLICY PRIORITY": every thread of IRQ reads so
all_at() {
    local p n=0
    for p in $(threads "$1"); do
        [ "$(sched "$p")" = "$2" ] || return 1
        n=$((n + 1))
    done
    [ $n -gt 0 ]
}
# irq_named NAME: the number of the IRQ NAME in /proc/interrupts
irq_named() { awk -v n="$1" '$NF == n { sub(":", "", $1); print $1; exit }' /proc/interrupts; }

NET=$(irq_named virtio1-input.0)
KBD=$(irq_named i8042)
DISK=$(irq_named virtio0-req.0)
[ -n "$NET" ] && [ -n "$(threads "$NET")" ] || skip "no thread for IRQ ${NET:-virtio1-input.0}: this kernel did not take threadirqs"
[ -n "$KBD" ] && [ -n "$(threads "$KBD")" ] || skip "no thread for the i8042 IRQ"
info "IRQ $NET (virtio1-input.0) threads: $(threads "$NET" | tr '\n' ' '); IRQ $KBD (i8042): $(threads "$KBD" | tr '\n' ' '); IRQ $DISK (virtio0-req.0): $(threads "$DISK" | tr '\n' ' ')"
check "the kernel starts IRQ threads at SCHED_FIFO 50" all_at "$NET" "1 50"
snap s0

cs on $SH --irq virtio1-input.0 --kthreads-above 80 --irq-priority "virtio1-*:90,$KBD:60"
check "on --irq-priority exits 0" [ "$CS_RC" -eq 0 ]
check "the bound NIC queue's thread runs at FIFO 90 (the pattern, over --kthreads-above's 81): $(for p in $(threads "$NET"); do sched "$p"; done | tr '\n' ' ')" all_at "$NET" "1 90"
check "i8042's thread, named by number, runs at FIFO 60 ($(for p in $(threads "$KBD"); do sched "$p"; done))" all_at "$KBD" "1 60"
[ -n "$DISK" ] && [ -n "$(threads "$DISK")" ] && check "an IRQ not named keeps FIFO 50" all_at "$DISK" "1 50"
cs status; check "status holds (exit $CS_RC)" [ "$CS_RC" -eq 0 ]

cs on $SH --irq virtio1-input.0 --kthreads-above 80 --irq-priority "$KBD:70"
check "a change in place exits 0" [ "$CS_RC" -eq 0 ]
check "i8042's thread now at FIFO 70" all_at "$KBD" "1 70"
check "the NIC queue's thread, no longer named, at --kthreads-above's 81" all_at "$NET" "1 81"
cs status; check "status holds after the change (exit $CS_RC)" [ "$CS_RC" -eq 0 ]

cs on $SH --irq-priority 0:80
check "an IRQ the kernel never threads (the timer's) is refused, exit 2" [ "$CS_RC" -eq 2 ]
check "... naming it and why" grep -q "IRQ 0 has no thread" "$OUT/cs.stderr"
cs on $SH --irq-priority "nosuch*:80"
check "a pattern that names no IRQ is refused, exit 2" [ "$CS_RC" -eq 2 ]
check "... nothing changed by the refusals: i8042's thread still at 70" all_at "$KBD" "1 70"

cs off; check "off exits 0" [ "$CS_RC" -eq 0 ]
check "off: i8042's thread back at FIFO 50" all_at "$KBD" "1 50"
check "off: the NIC queue's thread back at FIFO 50" all_at "$NET" "1 50"
snap s1; snap_equal s0 s1 "off: the snapshot equals the one before on"
note "--irq-priority with threadirqs: irq/$NET (virtio1-input.0) at FIFO 90 and irq/$KBD (i8042) at 60, then 81 and 70 in place, back to 50 after off"

# --irq-spread (tuna's --spread): the NIC's two queues bound to the shield
# get one shielded CPU each, in IRQ order, as the kernel reads them back.
TX=$(irq_named virtio1-output.0)
if [ -n "$TX" ]; then
    FIRST=$NET; SECOND=$TX
    [ "$TX" -lt "$NET" ] && { FIRST=$TX; SECOND=$NET; }
    cs on $SH --irq virtio1-input.0 --irq virtio1-output.0 --irq-spread
    check "on --irq-spread exits 0" [ "$CS_RC" -eq 0 ]
    check "IRQ $FIRST (the lower) gets shielded CPU 2 alone ($(cat /proc/irq/$FIRST/smp_affinity_list))" [ "$(cat /proc/irq/$FIRST/smp_affinity_list)" = 2 ]
    check "IRQ $SECOND gets shielded CPU 3 alone ($(cat /proc/irq/$SECOND/smp_affinity_list))" [ "$(cat /proc/irq/$SECOND/smp_affinity_list)" = 3 ]
    info "effective: IRQ $FIRST $(cat /proc/irq/$FIRST/effective_affinity_list 2>/dev/null), IRQ $SECOND $(cat /proc/irq/$SECOND/effective_affinity_list 2>/dev/null)"
    cs status; check "status holds with the spread (exit $CS_RC)" [ "$CS_RC" -eq 0 ]
    cs off; check "off after the spread exits 0" [ "$CS_RC" -eq 0 ]
    snap s2; snap_equal s0 s2 "off after the spread: the snapshot equals the one before on"
else
    info "no virtio1-output.0 IRQ: --irq-spread not tried"
fi
result
