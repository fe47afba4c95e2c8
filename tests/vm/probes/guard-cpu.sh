#!/bin/sh
# summary: where the starvation guard spends its CPU time behind a FIFO 80 loop on CPU 3 (per-thread utime/stime, the system call and kernel stack it is in, sampled); run with and without the boot line (--append)
# vm: cpus=4
. /guest/lib.sh "$1"
has_cpushield || { bad "cpushield binary in the guest"; result; }
info "cmdline: $(cat /proc/cmdline)"
GUARD_OPTS=$(tr " " "\n" </proc/cmdline | sed -n "s/^cpushield.guard_threshold=/--guard-threshold=/p")
cs on 2-3 --tune=all,rt-throttling $GUARD_OPTS; check "on 2-3 --tune=all,rt-throttling exits 0" [ "$CS_RC" -eq 0 ]
G=""
for d in /proc/[0-9]*; do [ "$(cat $d/comm 2>/dev/null)" = cpushield-guard ] && G=${d#/proc/}; done
check "a guard runs ($G)" [ -n "$G" ]
gtimes() { for t in /proc/$G/task/*; do printf '%s:%s+%s ' "${t##*/}" "$(awk '{ print $14 }' $t/stat)" "$(awk '{ print $15 }' $t/stat)"; done; }
info "idle, guard threads utime+stime (ticks): $(gtimes)"
sleep 3
info "idle, 3 s later: $(gtimes)"
cpushield run --cpu 3 --fifo 80 -- sh -c 'while :; do :; done' &
LOOP=$!
sleep 3
info "loop running 3 s: $(gtimes)"
for i in 1 2 3 4 5 6; do
    for t in /proc/$G/task/*; do
        info "sample $i task ${t##*/} state $(awk '{ print $3 }' $t/stat) syscall: $(cat $t/syscall 2>/dev/null) | stack: $(tr '\n' ' ' <$t/stack 2>/dev/null | cut -c1-300)"
    done
    sleep 0.5
done
info "after sampling: $(gtimes)"
# Which /proc reads are slow while the loop holds CPU 3 (µs, slowest first).
if command -v interfere >/dev/null 2>&1; then
    interfere time-reads /proc/[0-9]*/task/*/stat /proc/[0-9]*/task/*/schedstat 2>&1 | head -12 | sed 's/^/  read µs /'
    interfere time-reads /proc/[0-9]*/task/*/stat /proc/[0-9]*/task/*/schedstat 2>&1 | head -4 | sed 's/^/  again µs /'
fi
# Who uses the CPU meanwhile: every thread's utime+stime over 3 s, and the CPUs' own counters.
tticks() { for t in /proc/[0-9]*/task/*; do set -- $(sed 's/.*) //' $t/stat 2>/dev/null); [ -n "${12:-}" ] && echo "${t#/proc/} $(( ${12} + ${13} )) $(cat $t/comm 2>/dev/null) cpu=${37:-?} state=$1"; done; }
tticks >/tmp/tt0; head -5 /proc/stat >/tmp/ps0; sleep 3; tticks >/tmp/tt1; head -5 /proc/stat >/tmp/ps1
awk 'NR==FNR { a[$1] = $2; next } ($1 in a) && $2 - a[$1] > 5 { printf "  busy %5d ticks in 3 s: %s\n", $2 - a[$1], $0 }' /tmp/tt0 /tmp/tt1 | sort -k2 -rn | head -10
awk 'NR==FNR { for (i = 2; i <= NF; i++) a[$1, i] = $i; next } { printf "  %s 3 s:", $1; for (i = 2; i <= 9; i++) printf " %d", $i - a[$1, i]; print " (user nice system idle iowait irq softirq steal)" }' /tmp/ps0 /tmp/ps1
# Runnable threads bound to or last on CPU 3, with their run time so far.
for t in /proc/[0-9]*/task/*; do
    set -- $(sed 's/.*) //' $t/stat 2>/dev/null)
    [ "${1:-}" = R ] && [ "${37:-}" = 3 ] && info "runnable on 3: ${t#/proc/} $(cat $t/comm) schedstat $(cat $t/schedstat)"
done
info "guard state: $(tr -d ' \n' </run/cpushield/guard.json | cut -c1-600)"
for k in boosts failed candidates scan_us longest_work_us held_back; do
    info "guard $k: $(json_get /run/cpushield/guard.json .$k)"
done
cat /proc/sys/vm/stat_refresh >/dev/null &
R=$!
sleep 5
info "stat_refresh after 5 s: $(kill -0 $R 2>/dev/null && echo still waiting || echo done); guard times: $(gtimes)"
for t in /proc/$G/task/*; do
    info "task ${t##*/} syscall: $(cat $t/syscall 2>/dev/null) | stack: $(tr '\n' ' ' <$t/stack 2>/dev/null | cut -c1-300)"
done
kill -9 $LOOP; wait $LOOP 2>/dev/null
wait $R 2>/dev/null
cs off
result
