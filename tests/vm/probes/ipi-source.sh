#!/bin/sh
# summary: where the function-call IPIs (CAL) and SCHED softirqs on a
#   shielded CPU come from while compare's shielded phase measures it: the
#   counts per condition (measure or sleep inside the shield, load on the
#   housekeeping CPUs or none, a one- or two-CPU shield), and tracefs'
#   ipi_send_cpu events aimed at the CPU, by callback and sender (notes)
# vm: cpus=4
# Run: tests/vm/run.sh --no-build --kernel all ipi-source
. /guest/lib.sh "$1"
SECS=${IPI_SECS:-10}
has_cpushield || { bad "cpushield binary in the guest"; result; }
TR=/sys/kernel/tracing; [ -d $TR/events ] || TR=/sys/kernel/debug/tracing
col=5 # CPU 3's column
counts() { # CAL, RES, SCHED softirq, TIMER softirq on CPU 3
    awk -v c=$col '$1 == "CAL:" { cal = $c } $1 == "RES:" { res = $c } END { print cal + 0, res + 0 }' /proc/interrupts
    awk -v c=$col '$1 == "SCHED:" { s = $c } $1 == "TIMER:" { t = $c } END { print s + 0, t + 0 }' /proc/softirqs
}
# measure_case NAME SHIELD LOAD WHAT: counts on CPU 3 per second while WHAT
# runs inside a shield of SHIELD, LOAD (yes/no) on the other CPUs
measure_case() {
    name=$1 sh=$2 load=$3 what=$4
    cs on $sh
    if [ $load = yes ]; then
        hk=0-2; [ "$sh" = 2-3 ] && hk=0-1
        taskset -c "$hk" stress-ng --cpu 2 --io 1 --vm 1 --vm-bytes 32M --hdd 1 --hdd-bytes 16M --timeout $((SECS + 30)) >/dev/null 2>&1 &
        LOAD=$!
        sleep 2
    fi
    if [ -w $TR/events/ipi/ipi_send_cpu/enable ]; then
        echo > $TR/trace
        echo 'cpu == 3' > $TR/events/ipi/ipi_send_cpu/filter
        echo 1 > $TR/events/ipi/ipi_send_cpu/enable
    fi
    set -- $(counts | tr '\n' ' ')
    c0=$1 r0=$2 s0=$3 t0=$4
    case $what in
        measure) cpushield run --cpu 3 -- cpushield measure --cpus 3 --duration $SECS --json >/dev/null 2>&1 ;;
        sleep) cpushield run --cpu 3 -- sleep $SECS ;;
    esac
    set -- $(counts | tr '\n' ' ')
    rate() { awk -v a="$1" -v b="$2" -v s=$SECS 'BEGIN { printf "%.1f", (b - a) / s }'; }
    note "IPI $(uname -r) | $name | shield $sh, load $load, $what | CAL/s $(rate $c0 $1) | RES/s $(rate $r0 $2) | SCHED/s $(rate $s0 $3) | TIMER/s $(rate $t0 $4)"
    if [ -w $TR/events/ipi/ipi_send_cpu/enable ]; then
        echo 0 > $TR/events/ipi/ipi_send_cpu/enable
        echo 0 > $TR/events/ipi/ipi_send_cpu/filter
        # "<comm>-<pid> [cpu] ... ipi_send_cpu: cpu=3 callsite=X callback=Y"
        sed -n 's/^ *\(.*\)-[0-9]* *\[\([0-9]*\)\].*callsite=\([^ ]*\) callback=\([^ ]*\).*/from cpu\2 \1: \3 -> \4/p' $TR/trace |
            sed 's/+0x[0-9a-f\/]*//g' | sort | uniq -c | sort -rn | head -n 6 |
            while read -r n rest; do note "IPI   $name: $n x $rest"; done
    fi
    [ $load = yes ] && { kill $LOAD 2>/dev/null; wait $LOAD 2>/dev/null; }
    cs off
}
[ -d $TR/events/ipi/ipi_send_cpu ] || info "no ipi_send_cpu tracepoint (6.6+): counts only"
info "kernel command line: $(cat /proc/cmdline)"
# Booted with nohz_full= (run.sh --append): only the compare run.
if ! grep -qw "nohz_full=3" /proc/cmdline; then
measure_case a 3 yes measure
measure_case b 3 yes sleep
measure_case c 3 no measure
measure_case d 2-3 yes measure
measure_case e 2-3 yes sleep
check "off after the cases" [ "$CS_RC" -eq 0 ]
fi
# compare's own shielded phase, as the report that raised this ran it,
# traced the same way: what compare itself counts, and who sent the IPIs.
if [ -w $TR/events/ipi/ipi_send_cpu/enable ]; then
    echo > $TR/trace
    echo 'cpu == 3' > $TR/events/ipi/ipi_send_cpu/filter
    echo 'stacktrace if cpu == 3' > $TR/events/ipi/ipi_send_cpu/trigger
    echo 1 > $TR/events/ipi/ipi_send_cpu/enable
fi
set -- $(counts | tr '\n' ' ')
c0=$1 s0=$3
cs compare --cpus 3 --load full --duration 20 --phases shielded --out /tmp/ipi-compare
set -- $(counts | tr '\n' ' ')
note "IPI $(uname -r) | f | compare --cpus 3 --load full --duration 20 --phases shielded (whole run, shield up and down included) | CAL $(( $1 - c0 )) | SCHED $(( $3 - s0 ))"
grep -A12 'What reached' /tmp/ipi-compare/summary.txt 2>/dev/null | sed 's/^/    summary| /'
if [ -w $TR/events/ipi/ipi_send_cpu/enable ]; then
    echo 0 > $TR/events/ipi/ipi_send_cpu/enable
    echo 0 > $TR/events/ipi/ipi_send_cpu/filter
    echo '!stacktrace if cpu == 3' > $TR/events/ipi/ipi_send_cpu/trigger 2>/dev/null
    sed -n 's/^ *\(.*\)-[0-9]* *\[\([0-9]*\)\].*callsite=\([^ ]*\) callback=\([^ ]*\).*/from cpu\2 \1: \3 -> \4/p' $TR/trace |
        sed 's/+0x[0-9a-f\/]*//g' | sort | uniq -c | sort -rn | head -n 8 |
        while read -r n rest; do note "IPI   f: $n x $rest"; done
    # The kernel stacks that sent them: the three frames above the send.
    awk '/<stack trace>/ { s = 1; f = ""; n = 0; next } s && /^ => / { if (n >= 1 && n <= 4) f = f " < " $2; n++; next } s { if (f != "") print f; s = 0 } END { if (s && f != "") print f }' $TR/trace |
        sed 's/+0x[0-9a-f\/]*//g' | sort | uniq -c | sort -rn | head -n 5 |
        while read -r n rest; do note "IPI   f stack: $n x $rest"; done
fi
result
