#!/bin/sh
# summary: on 2-3 under systemd survives daemon-reload, restarts of journald
#   and irqbalance, new services, a user.slice process, a stress-ng service
#   and 60 s; run --cpu 3 works; off gives everything back
. /job/lib.sh "$1"
SH=2-3
irqbalance_settle
snap before
check "before: a service may ask for CPU 2 by itself" service_may_run_on 2
IRQB_BEFORE=$(irqbalance_pid)
cs on $SH
check "on $SH exits 0" [ "$CS_RC" = 0 ]
cp "$OUT/cs.out" "$OUT/on.out"
irqbalance_said_true "$OUT/on.out" "$IRQB_BEFORE" "$(irqbalance_pid)"
# IRQs left on the shield right after on must be ones the kernel refuses
irq_on $SH >"$OUT/irqs.after-on"
refused=""
while read -r n l; do
    if echo 0-1 >"/proc/irq/$n/smp_affinity_list" 2>/dev/null; then
        check "IRQ $n (on $l after on) is one the kernel refuses" false
    else refused="$refused $n"; fi
done <"$OUT/irqs.after-on"
info "IRQs that refuse to move:${refused:- none}"
ORIGIN=$(cut -d: -f3 /proc/self/cgroup)
/job/cpushield run --cpu 2 -- sleep 901 >"$OUT/run2.out" 2>&1 &
sleep 3
KEEPPID=$(pgrep -f "sleep 901" -n)
/job/cpushield run --cpu 3 -- sleep 900 >"$OUT/run.out" 2>&1 &
sleep 3
RUNPID=$(pgrep -f "sleep 900" -n)

info "ordinary activity: daemon-reload, journald and irqbalance restarts, new services, a user.slice process"
systemctl daemon-reload
systemctl restart systemd-journald
systemctl restart irqbalance
systemd-run --quiet --unit=cs-new sleep 900
systemd-run --quiet --slice=user.slice --uid=nobody --unit=cs-user sleep 900
systemd-run --quiet --unit=cs-stress stress-ng --cpu 4 --vm 1 --timeout 90s >/dev/null
sleep 5
systemctl daemon-reload
# sample where stress-ng's threads run (field 39 of stat: the CPU it last ran on)
seen=0; samples=0; shielded=" $(expand $SH | tr '\n' ' ')"
for i in $(seq 1 10); do
    for cpu in $(cat /proc/[0-9]*/stat 2>/dev/null | awk '$2 == "(stress-ng)" || $2 ~ /^\(stress-ng-/ {print $39}'); do
        samples=$((samples + 1))
        case "$shielded " in *" $cpu "*) seen=$((seen + 1)) ;; esac
    done
    sleep 0.5
done
info "stress-ng service: $seen of $samples samples on CPUs $SH"
check "stress-ng service ran (its processes sampled $samples times)" [ "$samples" -gt 20 ]
check "no stress-ng thread seen running on the shield" [ "$seen" = 0 ]
t_rest=30
info "waiting ${t_rest}s more (irqbalance rebalances every 10 s)"
sleep $t_rest
thread_leaks $SH >"$OUT/leaks"
info "threads outside the shield allowed on $SH: $(wc -l <"$OUT/leaks")"
sed 's/^/    /' "$OUT/leaks" | head -20
check "after a minute: 0 threads outside the shield allowed on $SH" [ ! -s "$OUT/leaks" ]
irq_on $SH >"$OUT/irqs.after-minute"
moved=$(awk -v r=" $refused " '{ if (index(r, " " $1 " ") == 0) print }' "$OUT/irqs.after-minute")
info "movable IRQs on $SH after a minute: ${moved:-none}"
check "after a minute: 0 movable IRQs on $SH" [ -z "$moved" ]
for u in cs-new cs-user systemd-journald irqbalance; do
    pid=$(systemctl show -p MainPID --value $u)
    c=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/$pid/status)
    check "service $u (pid $pid) allowed $c: off $SH" eval '! meets "$c" $SH'
done
check "a new service asking for CPU 2 by itself is refused by the kernel" eval '! service_may_run_on 2'
c=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/$RUNPID/status)
cg=$(cat /proc/$RUNPID/cgroup)
info "run --cpu 3: pid $RUNPID allowed $c, cgroup $cg"
check "run --cpu 3: still on CPU 3 after daemon-reloads" [ "$c" = 3 ]
check "run --cpu 3: in the shield's cgroup" eval 'echo "$cg" | grep -q cpushield'
cs status
check "status says the shield holds (exit 0)" [ "$CS_RC" = 0 ]

# measure --explain inside the shield, the load still running outside it,
# and a SCHED_FIFO 60 thread of ours in the shield on CPU 3 that spins 5 ms
# every 10 ms (tools/src/bin/interfere.rs): the kernel's trace of CPU 3 names that
# thread as the main cause of the slow samples, and none by the load. With
# 2 ms the spinner held off about one wake-up in seven, and under TCG the
# slow exits from idle in the other 80 % of the time could outnumber it
# (trixie: 374 against 440); at 5 ms it holds off about four in ten and
# leaves the CPU idle half as often.
# tracefs's top level is left as found (buffer_size_kb aside: on 6.1 any
# instance sets a kernel-wide flag it shows, tests/vm/KERNEL-NOTES.md 34)
# and the instance is gone.
TR=/sys/kernel/tracing
tf() {
    for f in current_tracer set_event tracing_on tracing_cpumask trace_clock trace_options; do
        echo "$f: $(tr '\n' ' ' <$TR/$f)"
    done
    echo "instances: $(ls $TR/instances | tr '\n' ' ')"
}
tf >"$OUT/trace.before"
check "interfere is in the job (cargo build -p cpushield-tools --bin interfere)" [ -x /job/interfere ]
# its standard input closes when sleep ends: the spinner then exits
sleep 20 | /job/cpushield run --cpu 3 -- /job/interfere spin --cpu 3 --prio 60 --every-ms 10 --spin-us 5000 >"$OUT/spin.out" 2>&1 &
SPIN=$!
sleep 2
/job/cpushield run --cpu 3 -- /job/cpushield measure --cpus 3 --duration 8 --prio 50 --explain 500 --json >"$OUT/explain.json" 2>"$OUT/explain.err"; rc=$?
sed 's/^/    | /' "$OUT/explain.err" | head -n 5
check "run --cpu 3 -- measure --explain 500 inside the shield exits 0 ($rc)" [ "$rc" = 0 ]
info "explain: $(grep -m3 -E '"(over_threshold|explained|lost_events)"' "$OUT/explain.json" | tr -d ' \n')"
info "causes: $(grep -E '^ *"cause": ' "$OUT/explain.json" | head -n 6 | sed 's/^ *"cause": //' | tr '\n' ' ')"
# The spinner shows in two forms: "task cs-spinner" (it kept the CPU
# after the wake-up) and "timer delivery (cs-spinner running)" (the timer
# interrupt came late while it ran: under TCG, the emulator's doing). The
# samples it is the main cause of, both forms together, outnumber those of
# any other task five times over. Causes of no task (an idle exit, the
# timer interrupt, the return to user) are not compared: under TCG on a
# busy host an idle exit can take as long as the spin (CI's trixie run:
# 449 slow idle exits against the spinner's 379; a quiet host: 27 against
# 794), the same rule as 19-explain's.
# main_causes FILE: "SPINNER_SAMPLES OTHER_TASK_MAX OTHER_TASK_NAME" from explain's causes
main_causes() {
    awk '/^ *"cause": /{c=$0; sub(/^ *"cause": "/,"",c); sub(/",*$/,"",c)}
         /^ *"main_in": /{n=$2+0; if (c ~ /cs-spinner/) s+=n;
             else if ((c ~ /^task / || c ~ / running\)$/) && n>m) {m=n; o=c}}
         END{printf "%d %d %s\n", s, m, o}' "$1"
}
set -- $(main_causes "$OUT/explain.json")
spin_main=$1 other_main=$2; shift 2; other_cause="${*:-none}"
info "slow samples by cause: $(awk '/^ *"cause": /{c=$0; sub(/^ *"cause": "/,"",c); sub(/",*$/,"",c)} /^ *"main_in": /{printf "%s %d; ", c, $2}' "$OUT/explain.json" | cut -c1-300)"
check "the spinner in the shield is the main cause of 5 times more slow samples than any other task ($spin_main samples; next task: $other_cause, $other_main)" \
    [ "$spin_main" -ge 100 -a "$spin_main" -gt $((other_main * 5)) ]
check "no stress-ng thread among the causes inside the shield" eval '! grep -q "\"cause\": \"[^\"]*stress-ng" "$OUT/explain.json"'
wait "$SPIN"
tf >"$OUT/trace.after"
check "tracefs's top level as before, no instance left" cmp -s "$OUT/trace.before" "$OUT/trace.after"
systemctl stop cs-new cs-user cs-stress 2>/dev/null
kill "$RUNPID" 2>/dev/null; sleep 1
cs off
check "off exits 0" [ "$CS_RC" = 0 ]
check "a task started with run and alive at off still runs" [ -d /proc/$KEEPPID ]
cg=$(cut -d: -f3 /proc/$KEEPPID/cgroup)
check "off put it back where it was started from ($ORIGIN; it is in $cg)" [ "$cg" = "$ORIGIN" ]
kill "$KEEPPID" 2>/dev/null
sleep 2
info "snapshot after off"
irqbalance_settle
snap after
info "snapshot taken"
snap_equal_after_irqbalance before after "after off: threads, IRQs, cgroups, unit properties, irqbalance as before"
check "after off: a new service may ask for CPU 2 again" service_may_run_on 2
systemd-run --quiet --unit=cs-after sleep 30
c=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/$(systemctl show -p MainPID --value cs-after)/status)
check "after off: a new service gets all CPUs ($c)" [ "$c" = 0-3 ]
systemctl stop cs-after
result
