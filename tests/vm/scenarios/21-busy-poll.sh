#!/bin/sh
# summary: a SCHED_FIFO 80 busy loop on shielded CPU 3 with --tune=all,rt-throttling (RT throttling off) does not wedge the kernel work queued there: stat_refresh, drop_caches, sync, status and off each finish within 10 s, the kernel logs no stall or hung task, and off stops the starvation guard; with --guard=off the same work hangs behind the loop (where the kernel has no fair server) and status names the starving threads
# vm: cpus=4
. /guest/lib.sh "$1"
SH=2-3
has_cpushield || { bad "cpushield binary in the guest"; result; }
[ "$(cgroup_mode)" = v2 ] || skip "needs cgroup v2"

now_ds() { awk '{ printf "%d", $1 * 10 }' /proc/uptime; }   # tenths of a second since boot
# within LIMIT WHAT CMD...: runs CMD in the background and waits up to
# LIMIT s for it; T_DS is how long it took (tenths of a second), T_DONE 1
# if it finished. A command stuck in the kernel cannot be killed: it is
# left behind (T_PID) for the caller to wait for once the loop is gone.
within() {
    limit=$1; what=$2; shift 2
    t0=$(now_ds)
    "$@" >/dev/null 2>&1 &
    T_PID=$!
    T_DONE=0
    while [ $(( $(now_ds) - t0 )) -lt $((limit * 10)) ]; do
        if ! kill -0 "$T_PID" 2>/dev/null; then T_DONE=1; break; fi
        sleep 0.1
    done
    T_DS=$(( $(now_ds) - t0 ))
    info "$what: $( [ $T_DONE = 1 ] && echo "done in $((T_DS / 10)).$((T_DS % 10)) s" || echo "still waiting after $limit s")"
}
guard_pids() {
    for d in /proc/[0-9]*; do
        [ "$(cat "$d/comm" 2>/dev/null)" = cpushield-guard ] && echo "${d#/proc/}"
    done
}
stalls() { dmesg | grep -cE 'blocked for more than|rcu.*[Ss]tall|soft lockup' || true; }
loc3() { awk '$1 == "LOC:" { print $5 }' /proc/interrupts; }
preempted() { awk '/^nonvoluntary_ctxt_switches/ { print $2 }' /proc/$LOOP/status 2>/dev/null; }
# quiet S WHAT: the loop alone for S seconds, nothing induced: how often it
# was preempted and the local timer interrupts of CPU 3 (the kernel's counters).
quiet() {
    p0=$(preempted); l0=$(loc3); b0=$(json_get /run/cpushield/guard.json .boosts 2>/dev/null)
    sleep "$1"
    p1=$(preempted); l1=$(loc3); b1=$(json_get /run/cpushield/guard.json .boosts 2>/dev/null)
    Q="$2, loop alone on CPU 3 for $1 s: preempted $((p1 - p0)) times, $((l1 - l0)) local timer interrupts on CPU 3, $(( ${b1:-0} - ${b0:-0} )) guard boosts"
    info "$Q"
}
spin() { cpushield run --cpu 3 --fifo 80 -- sh -c 'while :; do :; done' >/dev/null 2>&1 & LOOP=$!; sleep 1; }

STALLS0=$(stalls)
FAIR=0
# The fair deadline server (6.12+) keeps ordinary tasks running behind a
# real-time loop: kernel work cannot starve there, and no guard is needed.
case $(uname -r) in 6.1.*|6.[2-9].*|6.1[01].*) ;; *) FAIR=1 ;; esac
info "kernel $(uname -r), fair server expected: $FAIR, sched_rt_runtime_us=$(cat /proc/sys/kernel/sched_rt_runtime_us)"

cs on $SH --tune=all,rt-throttling
check "on $SH --tune=all,rt-throttling exits 0" [ "$CS_RC" -eq 0 ]
check "on says what protects the shielded CPUs' kernel work" grep -q "kernel work on the shielded CPUs" "$OUT/cs.out"
GUARD=$(guard_pids)
if [ $FAIR = 1 ]; then
    check "no guard where the fair server protects kernel work (guard: '$GUARD')" [ -z "$GUARD" ]
else
    check "on started the starvation guard (pid '$GUARD')" [ -n "$GUARD" ]
    GUARD_CPUS=$(awk '/^Cpus_allowed_list:/ { print $2 }' /proc/$GUARD/status 2>/dev/null)
    if [ -n "$GUARD_CPUS" ] && ! cpus_overlap "$GUARD_CPUS" $SH; then
        ok "the guard runs on the housekeeping CPUs ($GUARD_CPUS)"
    else
        bad "the guard runs on the housekeeping CPUs ($GUARD_CPUS)"
    fi
fi

spin
NV0=$(awk '/^nonvoluntary_ctxt_switches/ { print $2 }' /proc/$LOOP/status 2>/dev/null)
CS_T0=$(now_ds)
within 10 "cat /proc/sys/vm/stat_refresh" cat /proc/sys/vm/stat_refresh
check "stat_refresh finishes within 10 s behind the loop" [ $T_DONE = 1 ]
within 10 "echo 3 > /proc/sys/vm/drop_caches" sh -c 'echo 3 > /proc/sys/vm/drop_caches'
check "drop_caches finishes within 10 s behind the loop" [ $T_DONE = 1 ]
within 10 "sync" sync
check "sync finishes within 10 s behind the loop" [ $T_DONE = 1 ]
within 10 "cpushield status --json" sh -c "cpushield status --json >$OUT/status.json"
check "status finishes within 10 s behind the loop" [ $T_DONE = 1 ]
GUARDED_S=$(( ($(now_ds) - CS_T0) / 10 ))
NV1=$(awk '/^nonvoluntary_ctxt_switches/ { print $2 }' /proc/$LOOP/status 2>/dev/null)
sleep 2   # the boost in flight ends (1 s) and is counted
cpushield status --json >"$OUT/status.json" 2>/dev/null
BOOSTS=$(json_part "$OUT/status.json" guard .state.boosts)
FIFO=$(json_part "$OUT/status.json" guard .state.fifo_boosts)
RAN=$(json_part "$OUT/status.json" guard .state.ran_us)
LONGEST=$(json_part "$OUT/status.json" guard .state.longest_us)
info "guard: boosts=$BOOSTS (SCHED_FIFO $FIFO), ran ${RAN} µs in all, longest ${LONGEST} µs; the loop was preempted $((NV1 - NV0)) times in ${GUARDED_S} s"
for g in $GUARD; do
    info "the guard (pid $g, SCHED_FIFO 98 on the housekeeping CPUs) used $(awk '{ printf "%.2f", ($14 + $15) / 100 }' /proc/$g/stat 2>/dev/null) s of CPU so far"
done
if [ $FAIR = 0 ]; then
    check "the guard boosted the starving kernel work (boosts=$BOOSTS)" [ "${BOOSTS:-0}" -gt 0 ]
    check "status --json says the guard is alive" [ "$(json_part "$OUT/status.json" guard .alive)" = true ]
    note "guard behind a FIFO 80 loop on CPU 3 (stat_refresh, drop_caches, sync, status in ${GUARDED_S} s): ${BOOSTS} boosts (${FIFO} SCHED_FIFO), ${RAN} µs taken from the loop in all, longest ${LONGEST} µs; loop preempted $((NV1 - NV0)) times"
fi
quiet 10 "with the guard"; note "$Q"
kill -9 $LOOP 2>/dev/null; wait $LOOP 2>/dev/null
t0=$(now_ds)
cs off
T_DS=$(( $(now_ds) - t0 ))
check "off exits 0" [ "$CS_RC" -eq 0 ]
check "off finishes within 10 s ($((T_DS / 10)).$((T_DS % 10)) s)" [ "$T_DS" -le 100 ]
sleep 0.5
check "off stopped the guard (left: '$(guard_pids)')" [ -z "$(guard_pids)" ]
check "off removed the guard's state file" [ ! -e /run/cpushield/guard.json ]
check "the kernel logged no stall or hung task with the guard ($(( $(stalls) - STALLS0 )) new)" [ "$(stalls)" -eq "$STALLS0" ]

# The same without the guard: where nothing protects kernel work, it
# hangs behind the loop, and status names the threads that wait.
cs on $SH --tune=all,rt-throttling --guard=off
check "on --guard=off exits 0" [ "$CS_RC" -eq 0 ]
check "on --guard=off starts no guard" [ -z "$(guard_pids)" ]
if [ $FAIR = 0 ]; then
    check "on --guard=off warns that nothing protects kernel work" grep -q "WARNING: nothing protects kernel work" "$OUT/cs.out"
fi
spin
quiet 10 "without the guard"; note "$Q"
within 5 "cat /proc/sys/vm/stat_refresh (no guard)" cat /proc/sys/vm/stat_refresh
HUNG=$T_PID
if [ $FAIR = 0 ]; then
    check "without the guard stat_refresh hangs behind the loop" [ $T_DONE = 0 ]
    within 10 "cpushield status --json (no guard)" sh -c "cpushield status --json >$OUT/status2.json"
    if [ $T_DONE = 0 ]; then
        # Where it waits, as the kernel says, for the next look at why.
        for p in $(cat /proc/$T_PID/task/*/children 2>/dev/null) $T_PID; do
            for t in /proc/$p/task/*; do
                info "status stuck: $(cat $t/comm 2>/dev/null) ${t#/proc/} wchan $(cat $t/wchan 2>/dev/null): $(tr '\n' ' ' <$t/stack 2>/dev/null | cut -c1-400)"
            done
        done
        # (never /proc/locks: reading it waits for an RCU grace period)
        info "the journal's lock file says: $(cat /run/cpushield/lock 2>/dev/null)"
    fi
    check "status finishes while the work hangs" [ $T_DONE = 1 ]
    STARVING=$(json_flat "$OUT/status2.json" | awk -F '\t' '$1 ~ /^\.parts\[[0-9]+\]\.data\.starving\[[0-9]+\]\.name$/ { printf "%s ", $2 }')
    info "status names as starving: $STARVING"
    check "status names the starving kernel threads ($STARVING)" sh -c "echo '$STARVING' | grep -q kworker/3"
    check "status reports the shield broken by starving threads" grep -q '"id": "starving"' "$OUT/status2.json"
else
    check "with the fair server stat_refresh finishes behind the loop without a guard" [ $T_DONE = 1 ]
fi
kill -9 $LOOP 2>/dev/null; wait $LOOP 2>/dev/null
within 10 "stat_refresh once the loop is gone" sh -c "while kill -0 $HUNG 2>/dev/null; do sleep 0.1; done"
check "the hung work finishes once the loop is gone" [ $T_DONE = 1 ]
cs off
check "off exits 0" [ "$CS_RC" -eq 0 ]
result
