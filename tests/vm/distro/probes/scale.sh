#!/bin/sh
# summary: scale benchmark (run by benches/scale-guest.sh, not by CI): a
#   holder service of many threads plus sleep processes; rounds of
#   cpushield on/off, cset shield/--reset and tuna --isolate/--include
#   timed in one boot; then cpushield alone at several sizes
# Settings (run.sh --set NAME=VALUE): SCALE_THREADS (10000), SCALE_SLEEPERS
# (500), SCALE_ROUNDS (3), SCALE_TOOLS ("cpushield cset tuna"),
# SCALE_SIZES (cpushield alone at these thread counts, "" for none),
# SCALE_PROFILE (1: one more on/off under strace -c -f), SCALE_HOLD
# (seconds each shield is held between on and off, and between rounds,
# for every tool and size: 0; 22 lets Debian 12's irqbalance finish the rebuild a
# ban change starts, as a shield held in earnest would).
# Results: rows in $OUT/rounds.tsv and $OUT/sizes.tsv
# (tool round on_s off_s rc_on rc_off threads_on_shield).
. /job/lib.sh "$1"
SH=2-3
THREADS=${SCALE_THREADS:-10000}
SLEEPERS=${SCALE_SLEEPERS:-500}
ROUNDS=${SCALE_ROUNDS:-3}
TOOLS=${SCALE_TOOLS:-cpushield cset tuna}
SIZES=${SCALE_SIZES-}
HOLD=${SCALE_HOLD:-0}
PER_PROC=500

now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }
# timed NAME CMD...: runs CMD, its output in $OUT/NAME.out; DT seconds, RC
timed() {
    name=$1; shift
    t0=$(now); "$@" >"$OUT/$name.out" 2>&1; RC=$?; t1=$(now); DT=$(secs "$t0" "$t1")
    info "$* -> exit $RC in $DT s"
}
HOLDER_PIDS=""
# holder N: the holder service with N threads (processes of $PER_PROC
# threads) and the sleepers service with $SLEEPERS processes
holder() {
    procs=$(( ($1 + PER_PROC - 1) / PER_PROC ))
    systemd-run --quiet --unit=holder -p TasksMax=infinity \
        sh -c "sleep infinity | /job/idle_tasks $procs $PER_PROC >/run/holder.ready 2>&1"
    systemd-run --quiet --unit=sleepers -p TasksMax=infinity \
        sh -c "for i in \$(seq $SLEEPERS); do sleep 86400 & done; wait"
    i=0
    while ! grep -q '^ready' /run/holder.ready 2>/dev/null && [ $i -lt 600 ]; do sleep 1; i=$((i + 1)); done
    HOLDER_PIDS="$(sed -n 's/^ready //p' /run/holder.ready) $(cat /sys/fs/cgroup/system.slice/sleepers.service/cgroup.procs)"
    info "holder: $procs x $PER_PROC threads and $SLEEPERS sleepers in ${i}s; $(nthreads) tasks in all"
}
holder_stop() {
    systemctl stop holder.service sleepers.service >/dev/null 2>&1
    rm -f /run/holder.ready
    i=0; while [ "$(nthreads)" -gt 1000 ] && [ $i -lt 120 ]; do sleep 1; i=$((i + 1)); done
}
nthreads() { ls -d /proc/[0-9]*/task/[0-9]* 2>/dev/null | wc -l; }
# on_shield: how many threads of the holder and sleepers may run on $SH
on_shield() {
    /job/idle_tasks --affinities $HOLDER_PIDS | while read -r count cpus; do
        meets "$cpus" "$SH" && echo "$count"
    done | awk '{ s += $1 } END { print s + 0 }'
}
tool_on() {
    case $1 in
        cpushield) timed "$1-on" /job/cpushield on $SH ;;
        cset) timed "$1-on" cset shield --cpu $SH --kthread on ;;
        tuna) timed "$1-on" tuna --cpus $SH --isolate ;;
    esac
}
tool_off() {
    case $1 in
        cpushield) timed "$1-off" /job/cpushield off ;;
        cset) timed "$1-off" cset shield --reset ;;
        tuna) timed "$1-off" tuna --cpus $SH --include ;;
    esac
}

# reload: how long systemd takes for a daemon-reload (the irqbalance ban
# of on and its undo each need one) with the tasks that exist now
reload() {
    timed reload systemctl daemon-reload
    note "scale: systemctl daemon-reload with $(nthreads) tasks: $DT s"
}
echo 200000 >/proc/sys/kernel/threads-max
echo 200000 >/proc/sys/kernel/pid_max
irqbalance_settle
reload
for t in $TOOLS; do
    case $t in cpushield) ;; *) command -v "$t" >/dev/null || { check "$t is installed (run.sh --packages)" false; result; } ;; esac
done

# cpushield alone first, on a machine no other tool has touched (cset
# leaves its /cpusets mount behind, tuna its --isolate when --include fails)
: >"$OUT/sizes.tsv"
for size in $SIZES; do
    holder "$size"
    total=$(nthreads)
    reload
    for r in $(seq 3); do
        tool_on cpushield; on_s=$DT; rc_on=$RC
        timed status /job/cpushield status; st_s=$DT; rc_st=$RC
        [ "$rc_st" = 0 ] || sed 's/^/    | /' "$OUT/status.out" | grep -v '^    |  *[0-9]' | tail -8
        sleep "$HOLD"
        tool_off cpushield; off_s=$DT; rc_off=$RC
        sleep "$HOLD"
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$size" "$r" "$on_s" "$off_s" "$st_s" "$rc_on" "$rc_off" "$total" >>"$OUT/sizes.tsv"
        note "scale: size $size, $total tasks, round $r: on $on_s s, status $st_s s, off $off_s s (exits $rc_on $rc_st $rc_off)"
        check "size $size round $r: on, status and off exit 0" [ "$rc_on$rc_st$rc_off" = 000 ]
    done
    holder_stop
done

if [ -n "$ROUNDS" ] && [ "$ROUNDS" -gt 0 ]; then
    holder "$THREADS"
    total=$(nthreads)
    reload
    snap before
    : >"$OUT/rounds.tsv"
    # cpushield first: tuna's --include may fail and leave the machine changed
    for t in $TOOLS; do
        for r in $(seq "$ROUNDS"); do
            tool_on "$t"; on_s=$DT; rc_on=$RC
            [ "$t" = cpushield ] && grep -E '^ *took' "$OUT/$t-on.out" | sed "s/^/    $t on round $r: /"
            left=$(on_shield)
            sleep "$HOLD"
            tool_off "$t"; off_s=$DT; rc_off=$RC
            [ "$t" = cpushield ] && grep -E '^ *took' "$OUT/$t-off.out" | sed "s/^/    $t off round $r: /"
            [ "$rc_on" = 0 ] || sed 's/^/    | /' "$OUT/$t-on.out" | tail -5
            [ "$rc_off" = 0 ] || sed 's/^/    | /' "$OUT/$t-off.out" | tail -5
            printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$t" "$r" "$on_s" "$off_s" "$rc_on" "$rc_off" "$left" "$total" >>"$OUT/rounds.tsv"
            note "scale: $t round $r, $total tasks: on $on_s s (exit $rc_on), off $off_s s (exit $rc_off), $left holder threads allowed on $SH after on"
            sleep "$HOLD"
        done
        if [ "$t" = cpushield ] && [ "${SCALE_PROFILE:-0}" = 1 ] && command -v strace >/dev/null; then
            # the syscall mix, then every call timed (strace -T) into the results
            strace -c -f -o "$OUT/strace-on.txt" /job/cpushield on $SH >"$OUT/profile-on.out" 2>&1
            strace -c -f -o "$OUT/strace-off.txt" /job/cpushield off >"$OUT/profile-off.out" 2>&1
            strace -f -tt -T -o "$OUT/trace-on.txt" /job/cpushield on $SH >/dev/null 2>&1
            strace -f -tt -T -o "$OUT/trace-off.txt" /job/cpushield off >/dev/null 2>&1
            for f in strace-on strace-off; do echo "  --- $f"; head -n 25 "$OUT/$f.txt" | sed 's/^/    /'; done
            gzip -f "$OUT"/trace-on.txt "$OUT"/trace-off.txt
        fi
        if [ "$t" = cpushield ]; then
            snap after-cpushield
            snap_equal before after-cpushield "after $ROUNDS rounds of cpushield on/off the machine is as before"
            check "cpushield: every on and off exits 0" [ -z "$(awk -F'\t' '$1 == "cpushield" && ($5 != 0 || $6 != 0)' "$OUT/rounds.tsv")" ]
            check "cpushield: no holder thread allowed on $SH after on" [ -z "$(awk -F'\t' '$1 == "cpushield" && $7 != 0' "$OUT/rounds.tsv")" ]
        fi
    done
    holder_stop
fi

result
