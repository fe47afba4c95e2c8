#!/bin/sh
# summary: the guard's stalld engine with the real stalld (CPUSHIELD_VM_STALLD=path/to/static/stalld tests/vm/run.sh --kernel 6.1 stalld-guard): on 2-3 --tune=all,rt-throttling runs stalld from the guard once throttling is off, with -S and the shield's CPUs; behind a SCHED_FIFO 80 loop on CPU 3 stat_refresh finishes and stalld's boosts are counted by status; off stops stalld and puts HRTICK_DL and throttling back
# vm: cpus=4
. /guest/lib.sh "$1"
has_cpushield || { bad "cpushield binary in the guest"; result; }
[ -x /usr/sbin/stalld ] || skip "no stalld in the guest (CPUSHIELD_VM_STALLD=path/to/static/stalld)"
now_ds() { awk '{ printf "%d", $1 * 10 }' /proc/uptime; }
FEAT=/sys/kernel/debug/sched/features
[ -f $FEAT ] || FEAT=/sys/kernel/debug/sched_features
stalld_pids() { for d in /proc/[0-9]*; do [ "$(cat "$d/comm" 2>/dev/null)" = stalld ] && echo "${d#/proc/}"; done; }
hrtick() { tr ' ' '\n' <$FEAT | grep -x 'NO_HRTICK_DL\|HRTICK_DL'; }
info "before: $(hrtick), sched_rt_runtime_us $(cat /proc/sys/kernel/sched_rt_runtime_us)"
H0=$(hrtick); RT0=$(cat /proc/sys/kernel/sched_rt_runtime_us)
# round OPTS...: one shield with stalld as the engine, the loop, stat_refresh timed
round() {
    tag=$1; shift
    CS_SHOW=60 cs on 2-3 --tune=all,rt-throttling "$@"; check "$tag: on 2-3 --tune=all,rt-throttling $* exits 0" [ "$CS_RC" -eq 0 ]
    check "$tag: on says stalld watches the shielded CPUs" grep -q "stalld (installed here) watches them" "$OUT/cs.out"
    i=0; while [ -z "$(stalld_pids)" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
    S=$(stalld_pids)
    info "$tag: after on: sched_rt_runtime_us $(cat /proc/sys/kernel/sched_rt_runtime_us); the guard's state: $(tr -d '\n' </run/cpushield/guard.json | sed 's/.*"stalld"/"stalld"/' | cut -c1-400)"
    check "$tag: stalld runs ($S)" [ -n "$S" ]
    info "$tag: stalld's command line: $(tr '\0' ' ' </proc/$S/cmdline 2>/dev/null)"
    check "$tag: stalld watches CPUs 2-3, never touches throttling (-S)" sh -c "tr '\0' ' ' </proc/$S/cmdline | grep -q -- '-S -c 2-3 '"
    check "$tag: HRTICK_DL on ($(hrtick))" [ "$(hrtick)" = HRTICK_DL ]
    CS_SHOW=40 cs status; check "$tag: status: holds (exit 0)" [ "$CS_RC" -eq 0 ]
    check "$tag: status names stalld as the guard's engine" grep -q "guard engine.*stalld running, pid $S" "$OUT/cs.out"
    cpushield run --cpu 3 --fifo 80 -- sh -c 'while :; do :; done' >/dev/null 2>&1 &
    LOOP=$!
    sleep 2
    t0=$(now_ds)
    cat /proc/sys/vm/stat_refresh >/dev/null &
    R=$!
    while kill -0 $R 2>/dev/null && [ $(( $(now_ds) - t0 )) -lt 300 ]; do sleep 0.1; done
    T=$(( $(now_ds) - t0 ))
    DONE=$(kill -0 $R 2>/dev/null && echo "still waiting after" || echo "done in")
    note "stalld engine ($tag: $*), FIFO 80 loop on CPU 3: stat_refresh $DONE $((T / 10)).$((T % 10)) s"
    sleep 3
    cpushield status --json >"$OUT/st.json" 2>/dev/null
    B=$(json_part "$OUT/st.json" guard .state.boosts)
    info "$tag: status: boosts $B; recent: $(json_flat "$OUT/st.json" | awk -F '\t' '$1 ~ /^\.parts\[[0-9]+\]\.data\.state\.recent\[[0-9]+\]\.name$/ { printf "%s ", $2 }')"
    check "$tag: status counts stalld's boosts (${B:-none})" [ "${B:-0}" -ge 1 ]
    kill -9 $LOOP; wait $LOOP 2>/dev/null; wait $R 2>/dev/null
    CS_SHOW=30 cs off; check "$tag: off exits 0" [ "$CS_RC" -eq 0 ]
    check "$tag: no stalld left ($(stalld_pids))" [ -z "$(stalld_pids)" ]
    check "$tag: HRTICK_DL as before ($(hrtick), was $H0)" [ "$(hrtick)" = "$H0" ]
    check "$tag: throttling as before ($(cat /proc/sys/kernel/sched_rt_runtime_us), was $RT0)" [ "$(cat /proc/sys/kernel/sched_rt_runtime_us)" = "$RT0" ]
}
# The guard's default settings become 50 µs every 200 ms for 1 s in
# stalld's ranges: stalld does not lengthen a boost that did not suffice
# (the guard's own loop doubles it), so under emulation, where kernel work
# runs tens of times slower, stat_refresh may wait long; then stalld's
# longest runtime, 1 ms, must get it through. That round runs first: after
# a default round whose stat_refresh was still waiting, the next on once
# found the guest stalled for 100 s and stalld not yet started.
round longest --guard-runtime=1000
LT=$T; LDONE=$DONE
round default
T=$LT; DONE=$LDONE
check "longest: stat_refresh behind the loop finishes within 30 s ($DONE $((T / 10)).$((T % 10)) s)" [ "$DONE" = "done in" ]
dmesg | grep -E 'blocked for more than|rcu.*[Ss]tall' | head -3 | sed 's/^/  dmesg: /'
result
