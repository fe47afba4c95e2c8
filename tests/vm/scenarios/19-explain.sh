#!/bin/sh
# summary: measure --explain names what delayed the timer probe on CPU 3: a FIFO 60 spinner (cs-spinner) is the top cause; the virtio-net input IRQ steered to CPU 3 with ping traffic shows as that IRQ and softirq NET_RX; under stress-ng no SCHED_OTHER task is the top cause; tracefs is left as found after every run, after Ctrl-C, and after a kill -9 once measure --clean-up or the next run has cleaned up
# vm: cpus=4 kernels=6.12
. /guest/lib.sh "$1"
has_cpushield || { bad "cpushield binary in the guest"; result; }
command -v interfere >/dev/null 2>&1 || skip "no interfere in the guest (cargo build -p cpushield-tools --bin interfere)"
CPU=3
COL=$((CPU + 2))   # CPU 3's column in /proc/interrupts and /proc/softirqs
E=.results[0].explain

# Nothing is shielded: the measuring thread (SCHED_FIFO 50) shares CPU 3
# with whatever the case puts there. Thresholds: under TCG a third (6.1)
# to two thirds (6.12) of the idle samples are over 100 µs and ~2 % over
# 500 µs (timer probe, 1 ms, prio 50, 10 s), spread over causes of the
# emulation's making; a spinner holding CPU 3 for 400 µs every 20 ms
# delays only 150-700 samples past 100 µs, too few to be the top cause
# there. So the spinner case spins 2 ms every 10 ms and explains past
# 500 µs: 1,136-1,155 samples over it, cs-spinner the main part of 836-855,
# the next cause of 137-212 (6.12, 6.1): figures of 10 s runs; each case
# runs 5 s since, for CI's time, with about half as many. The IRQ case only asks that the
# IRQ and NET_RX appear: 100 µs, the most samples.
SPIN="--every-ms 10 --spin-us 2000"
SPIN_TH=500
IRQ_TH=100
LOAD_TH=500

# ---- tracefs, as cpushield must leave it ------------------------------------
TR=""
for d in /sys/kernel/tracing /sys/kernel/debug/tracing; do
    # reading under debugfs' tracing mounts tracefs there (automount), so
    # the first snapshot already has that mount
    [ -f "$d/trace" ] && { TR=$d; break; }
done
[ -n "$TR" ] || { bad "tracefs found (/sys/kernel/tracing or /sys/kernel/debug/tracing)"; result; }
info "tracefs at $TR"
# tsnap NAME: the top-level files an explain run must not change, the
# instances and the tracefs mounts, one line each
tsnap() {
    {
        for f in current_tracer set_event tracing_on tracing_cpumask buffer_size_kb \
                 buffer_total_size_kb trace_clock trace_options events/enable set_event_pid; do
            printf '%s: %s\n' "$f" "$(cat "$TR/$f" 2>&1 | tr '\n' ' ')"
        done
        echo "instances: $(ls "$TR/instances" | tr '\n' ' ')"
        echo "mounts: $(awk '$3 == "tracefs" { print $2 }' /proc/mounts | sort | tr '\n' ' ')"
    } >"$OUT/trace.$1"
}
# tsnap_equal A B WHAT: the snapshots are equal. On 6.1 one change is the
# kernel's and cannot be undone: the first ring buffer resize or event
# enabled in *any* instance sets a kernel-global "expanded" flag, and the
# top level's buffer_size_kb then reads "7" (or the expanded "1410")
# instead of "7 (expanded: 1408)" until reboot (6.12 keeps the flag per
# instance: unchanged). That one change is allowed on 6.1, and noted.
tsnap_equal() {
    local a=$OUT/trace.$1 b=$OUT/trace.$2
    awk -v k="$KSERIES" '{ i = index($0, ": "); f = substr($0, 1, i - 1); v = substr($0, i + 2) }
        NR == FNR { was[f] = v; next }
        k == "6.1" && (f == "buffer_size_kb" || f == "buffer_total_size_kb") \
            && was[f] ~ /\(expanded: [0-9]+\)/ && v !~ /expanded/ {
            split(was[f], x, /[ ():]+/)     # x[1] size, x[3] expanded size
            n = v + 0
            if (n == x[1] || (n >= x[3] && n <= x[3] + x[3] / 50 + 16)) {
                print f ": " was[f]
                print f ": " was[f] "-> " v >"/dev/stderr"
                next
            }
        }
        { print }' "$a" "$b" >"$b.cmp" 2>"$b.expanded"
    [ -s "$b.expanded" ] && note "tracefs top level after an explain run: $(tr '\n' ';' <"$b.expanded") (6.1: kernel-global ring_buffer_expanded flag, set by any instance; allowed)"
    if diff "$a" "$b.cmp" >"$b.diff"; then
        ok "$3"
    else
        bad "$3"
        sed 's/^/    /' "$b.diff" | head -n 30
    fi
}

# matches STRING ERE
matches() { echo "$1" | grep -Eq "$2"; }

# ---- reading the JSON (no jq in the guest: lib.sh's json_flat) --------------
# ex NAME FIELD: .results[0].explain.FIELD of run NAME
ex() { awk -F '\t' -v p="$E.$2" '$1 == p { print $2; exit }' "$OUT/$1.flat"; }
# causes NAME: "main_in total_ns samples max_ns kind|cause" per cause, in
# the order listed
causes() {
    awk -F '\t' -v e="$E.causes[" '
        index($1, e) == 1 {
            r = substr($1, length(e) + 1); i = r + 0; f = r; sub(/^[0-9]+\]\./, "", f)
            if (!(i in seen)) { seen[i] = 1; order[n++] = i }
            v[i, f] = $2
        }
        END { for (j = 0; j < n; j++) { i = order[j]
            # %s, not %d: %d of busybox awk stops at 2^31 (2.1 s of ns)
            printf "%s %s %s %s %s|%s\n", n0(v[i, "main_in"]), n0(v[i, "total_ns"]), n0(v[i, "samples"]), n0(v[i, "max_ns"]), v[i, "kind"], v[i, "cause"] } }
        function n0(x) { return x == "" ? 0 : x }' "$OUT/$1.flat"
}
# top_cause NAME: the cause with the largest main_in (the first listed on
# a tie: the list is sorted by main_in, then total_ns)
top_cause() { causes "$1" | awk '$1 > m || NR == 1 { m = $1; c = $0; sub(/^[^|]*\|/, "", c) } END { print c }'; }
# has_cause NAME ERE: a cause's name matches
has_cause() { causes "$1" | sed 's/^[^|]*|//' | grep -Eq "$2"; }
# cause_field NAME EXACT-CAUSE COLUMN(1 main_in, 2 total_ns, 3 samples, 4 max_ns)
cause_field() { causes "$1" | awk -v c="$2" -v k="$3" '{ n = $0; sub(/^[^|]*\|/, "", n) } n == c { print $k; exit }'; }

# explain_run NAME THRESHOLD_US: one 5 s measure --explain --json on CPU 3;
# JSON in $OUT/NAME.json, flattened in $OUT/NAME.flat; tracefs checked after
explain_run() {
    local name=$1 th=$2
    CS_SHOW=3 cs measure --cpus $CPU --probe timer --interval 1000 --duration 5 --prio 50 --explain "$th" --json
    RUN_RC=$CS_RC
    cp "$OUT/cs.stdout" "$OUT/$name.json"
    json_flat "$OUT/$name.json" >"$OUT/$name.flat"
    check "$name: measure --explain $th exits 0" [ "$RUN_RC" -eq 0 ]
    check "$name: the JSON has $E" [ -n "$(ex $name threshold_ns)" ]
    check "$name: threshold_ns is $th µs ($(ex $name threshold_ns))" [ "$(ex $name threshold_ns)" = $((th * 1000)) ]
    local over expl lost
    over=$(ex $name over_threshold); expl=$(ex $name explained); lost=$(ex $name lost_events)
    info "$name: ${over:-?} samples over $th µs, ${expl:-?} explained, ${lost:-?} trace events lost"
    check "$name: samples over the threshold (${over:-none}) and explained (${expl:-none}) <= them" \
        [ "${over:-0}" -gt 0 -a "${expl:--1}" -ge 0 -a "${expl:-0}" -le "${over:-0}" ]
    causes "$name" | head -n 8 | awk '{ c = $0; sub(/^[^|]*\|/, "", c); k = $5; sub(/\|.*/, "", k)
        printf "  cause: %-32s %-10s main in %5d, in %5d samples, total %8.1f ms, max %7.1f µs\n", c, k, $1, $3, $2 / 1e6, $4 / 1e3 }'
    # the worst sample: its latency, its parts (label or cause, ns), its trace
    awk -F '\t' -v p="$E.worst[0]." 'index($1, p) != 1 { next }
        { k = substr($1, length(p) + 1) }
        k == "latency_ns" { lat = $2 }
        k ~ /^(segments|pieces)\[[0-9]+\]\.(label|cause)$/ { i = k; sub(/\]\..*/, "", i); sub(/.*\[/, "", i); if (!(i in what) || k ~ /label$/) what[i] = $2; if (i + 1 > np) np = i + 1 }
        k ~ /^(segments|pieces)\[[0-9]+\]\.ns$/ { i = k; sub(/\]\..*/, "", i); sub(/.*\[/, "", i); ns[i] = $2 }
        k ~ /^trace\[[0-9]+\]$/ { nt++ }
        END { printf "%s %d %d\t  worst: %.1f µs:", (lat == "" ? 0 : lat), np, nt, lat / 1e3
              for (i = 0; i < np; i++) printf " %s %.1f µs%s", what[i], ns[i] / 1e3, (i + 1 < np ? "," : "")
              printf " (%d trace lines)\n", nt }' "$OUT/$name.flat" >"$OUT/$name.worst"
    cut -f 2- "$OUT/$name.worst"
    read -r w_lat w_parts w_trace _ <"$OUT/$name.worst"
    check "$name: the worst sample is over the threshold ($w_lat ns) with its parts ($w_parts) and trace lines ($w_trace)" \
        [ "$w_lat" -ge $((th * 1000)) -a "$w_parts" -gt 0 -a "$w_trace" -gt 0 ]
    # every worst sample comes with the trace lines it was explained from
    awk -F '\t' -v p="$E.worst[" 'index($1, p) != 1 { next }
        { r = substr($1, length(p) + 1); i = r + 0; k = r; sub(/^[0-9]+\]\./, "", k) }
        k == "latency_ns" { n++; lat[i] = $2 }
        k ~ /^trace\[[0-9]+\]$/ { t[i]++ }
        END { for (i in lat) if (!t[i]) { e++; l = l sprintf(" %.1f", lat[i] / 1e6) }
              printf "%d %d%s\n", n, e, (e ? " the samples of" l " ms" : "") }' "$OUT/$name.flat" >"$OUT/$name.worst-all"
    read -r w_n w_empty w_why <"$OUT/$name.worst-all"
    check "$name: each of the $w_n worst samples has its trace lines ($w_empty have none${w_why:+: }$w_why)" [ "$w_n" -gt 0 -a "$w_empty" -eq 0 ]
    # timerlat's split: the IRQ's latency within the thread's, the worst sample's too
    local s_n s_irq s_thr w_irq
    s_n=$(ex $name irq_thread.samples); s_irq=$(ex $name irq_thread.irq_max_ns); s_thr=$(ex $name irq_thread.thread_max_ns)
    w_irq=$(awk -F '\t' -v p="$E.worst[0].irq_ns" '$1 == p { print $2; exit }' "$OUT/$name.flat")
    info "$name: timer IRQ latency max ${s_irq:-?} ns, thread latency max ${s_thr:-?} ns over ${s_n:-?} samples; worst sample's IRQ at ${w_irq:-?} ns of $w_lat"
    check "$name: the IRQ/thread split covers explained samples (${s_n:-none} of ${expl:-none}) with IRQ latency max (${s_irq:-none}) <= thread latency max (${s_thr:-none})" \
        [ "${s_n:-0}" -gt 0 -a "${s_n:-0}" -le "${expl:-0}" -a "${s_irq:-1}" -le "${s_thr:-0}" ]
    check "$name: the worst sample's IRQ came within its latency (${w_irq:-none} <= $w_lat ns)" [ "${w_irq:--1}" -ge 0 -a "${w_irq:-0}" -le "$w_lat" ]
    export_files "$OUT/$name.json"
    tsnap "$name"
    tsnap_equal before "$name" "$name: tracefs (top-level files, instances, mounts) as before the first run"
}

tsnap before
sed 's/^/  tracefs| /' "$OUT/trace.before"
check "no trace instance before the first run ($(ls "$TR/instances" | tr '\n' ' '))" [ -z "$(ls "$TR/instances")" ]
HAS_EXPLAIN=1
cpushield measure --help 2>&1 | grep -q -- '--explain' || { HAS_EXPLAIN=0; bad "measure has --explain (not in 'cpushield measure --help')"; }

# ---- 1. a SCHED_FIFO 60 task on CPU 3 ---------------------------------------
mkfifo "$OUT/hold.spin"
# shellcheck disable=SC2086
interfere spin --cpu $CPU --prio 60 $SPIN <"$OUT/hold.spin" >"$OUT/spin.out" 2>&1 &
SP=$!
exec 7>"$OUT/hold.spin"     # interfere runs while this stays open
i=0
while ! grep -q '^ready' "$OUT/spin.out" && [ $i -lt 20 ] && kill -0 $SP 2>/dev/null; do sleep 0.5; i=$((i + 1)); done
STID=$(awk '/^ready/ { print $2 }' "$OUT/spin.out")
check "interfere spin is ready (tid ${STID:-none}; $(head -c 200 "$OUT/spin.out" | tr '\n' ' '))" [ -n "$STID" ]
if [ -n "$STID" ]; then
    check "the spinner is named cs-spinner ($(cat /proc/$SP/task/$STID/comm))" [ "$(cat /proc/$SP/task/$STID/comm)" = cs-spinner ]
    pol=$(chrt -p "$STID" | tr '\n' ' ')
    check "the spinner is SCHED_FIFO 60 ($pol)" matches "$pol" 'SCHED_FIFO.*priority: 60'
    check "the spinner is on CPU $CPU only ($(taskset -p "$STID" | awk '{ print $NF }'))" [ "$(taskset -p "$STID" | awk '{ print $NF }')" = 8 ]
fi
explain_run spinner $SPIN_TH
top=$(top_cause spinner)
# Either form names it: "task cs-spinner" (it kept the CPU after the
# wake-up) or "timer delivery (cs-spinner running)" (the timer interrupt
# came late while it ran: under TCG the emulator's doing; on 7.x the two
# come close, 418 and 412 samples in one run). On a busy host the
# emulator's late delivery to an idle CPU can come first (CI: "timer
# delivery (idle exit)" 822 samples, "task cs-spinner" 321): a cause of
# no task may lead, another task never (the spinner must still be among
# the causes, checked below).
case "$top" in
    task*|*running\)) check "spinner: the top cause names cs-spinner, if a task ('$top')" matches "$top" '^(task cs-spinner|timer delivery \(cs-spinner running\))$' ;;
    *) info "spinner: the top cause is one of no task ('$top'); cs-spinner must be among the others" ;;
esac
check "spinner: 'task cs-spinner' is among the causes" has_cause spinner '^task cs-spinner$'
mx=$(cause_field spinner "task cs-spinner" 4)
check "spinner: cs-spinner held a sample at least 500 µs (max ${mx:-none} ns; it spins 2 ms)" [ "${mx:-0}" -ge 500000 ]
# the text output, briefly, with the spinner still there
CS_SHOW=12 cs measure --cpus $CPU --probe timer --interval 1000 --duration 5 --prio 50 --explain $SPIN_TH
check "text: measure --explain exits 0" [ "$CS_RC" -eq 0 ]
check "text: a line per worst sample ('N µs on CPU $CPU (its timer IRQ woke it at M µs): ...')" grep -Eq "[0-9] µs on CPU $CPU \(its timer IRQ woke it at [0-9.]+ µs\): " "$OUT/cs.stdout"
check "text: timerlat's split of IRQ and thread latency" grep -Eq "timer IRQ and thread \(timerlat's split\), [1-9][0-9]* samples: IRQ latency max [0-9.]+ µs, thread latency max [0-9.]+ µs" "$OUT/cs.stdout"
check "text: cs-spinner named" grep -q 'cs-spinner' "$OUT/cs.stdout"
tsnap text
tsnap_equal before text "text: tracefs as before the first run"
# The noise probe's gaps cut the same way (osnoise's sources): the spinner
# at 60 preempts the spinning thread at 50; a gap is never the thread's
# own return, and a gap with no kernel event in it is the hardware's.
CS_SHOW=3 cs measure --cpus $CPU --probe noise --duration 5 --prio 50 --explain $SPIN_TH --json
RUN_RC=$CS_RC
cp "$OUT/cs.stdout" "$OUT/noise.json"
json_flat "$OUT/noise.json" >"$OUT/noise.flat"
check "noise: measure --probe noise --explain exits 0" [ "$RUN_RC" -eq 0 ]
n_expl=$(ex noise explained)
causes noise >"$OUT/noise.causes"
check "noise: gaps over $SPIN_TH µs explained (${n_expl:-none})" [ "${n_expl:-0}" -gt 0 ]
check "noise: 'task cs-spinner' is among the causes of the gaps" has_cause noise '^task cs-spinner$'
check "noise: no gap is the thread's own return to user ($(causes noise | sed 's/^[^|]*|//' | tr '\n' ';'))" \
    sh -c '! grep -q "|return to user$" "$1"' _ "$OUT/noise.causes"
hw=$(cause_field noise "hardware (no kernel event)" 2)
info "noise: causes: $(causes noise | sed 's/^[^|]*|//' | tr '\n' ';'); hardware (no kernel event) ${hw:-0} ns"
note "noise probe --explain: hardware (no kernel event) ${hw:-0} ns of the gaps over $SPIN_TH µs in 5 s on CPU $CPU, beside the spinner's"
tsnap noise
tsnap_equal before noise "noise: tracefs as before the first run"
exec 7>&-
wait $SP 2>/dev/null

# ---- 1b. spinners whose names are hostile ------------------------------------
# A task names itself anything: a trailing newline (what `echo NAME >
# /proc/self/comm` leaves) cuts the trace's text lines inside the name, and
# a name can look like a trace line. Either spinner must be named as the
# cause of the samples it delays (escaped: `qxhog\n`), never the task
# that ran before it.
for case in newline imitation; do
    case $case in
        # NAME for interfere (\n: newline); SHOWN as an ERE of the escaped
        # name; ASK as awk -v takes it (it reads \\ as one backslash)
        newline) NAME='qxhog\n'; SHOWN='qxhog\\n'; ASK='task qxhog\\n' ;;
        imitation) NAME='<idle>-0 [003]'; SHOWN='<idle>-0 \[003\]'; ASK='task <idle>-0 [003]' ;;
    esac
    mkfifo "$OUT/hold.$case"
    # shellcheck disable=SC2086
    interfere spin --cpu $CPU --prio 60 $SPIN --name "$NAME" <"$OUT/hold.$case" >"$OUT/$case.out" 2>&1 &
    SP=$!
    exec 7>"$OUT/hold.$case"
    i=0
    while ! grep -q '^ready' "$OUT/$case.out" && [ $i -lt 20 ] && kill -0 $SP 2>/dev/null; do sleep 0.5; i=$((i + 1)); done
    STID=$(awk '/^ready/ { print $2 }' "$OUT/$case.out")
    check "$case: the spinner is ready (tid ${STID:-none}; comm $(od -c /proc/$SP/task/${STID:-0}/comm 2>/dev/null | head -n1 | cut -c8-))" [ -n "$STID" ]
    explain_run "$case" $SPIN_TH
    top=$(top_cause "$case")
    # The top cause is the spinner, or a cause of no task (on a busy host
    # the emulator's late timer delivery can come first), never another
    # task: the bug this guards against named the task that ran before.
    case "$top" in
        task*|*running\)) check "$case: the top cause names the spinner, if a task ('$top')" matches "$top" "^(task $SHOWN|timer delivery \\($SHOWN running\\))\$" ;;
        *) check "$case: the top cause is no other task ('$top')" [ -n "$top" ] ;;
    esac
    # Its own share, not another task's: the spinner is the main cause of
    # many more samples than any other task (alone, about 940 of 1,100
    # explained; the bug this guards against charged them to 'task usleep').
    # Not "most of all samples": on a busy host the emulator's late timer
    # delivery explains more of them.
    mine=$(cause_field "$case" "$ASK" 1)
    all=$(ex "$case" explained)
    other=$(causes "$case" | awk -v c="$ASK" '{ n = $0; sub(/^[^|]*\|/, "", n) } n ~ /^task / && n != c && $1 > m { m = $1; w = n } END { printf "%d %s", m, w }')
    info "$case: main cause of ${mine:-0} of ${all:-0} explained samples; the next task: ${other#* } (${other%% *})"
    check "$case: the spinner is the main cause of 5 times more samples than any other task (${mine:-0}, next ${other%% *})" \
        [ "${mine:-0}" -ge 100 -a "${mine:-0}" -gt $(( ${other%% *} * 5 )) ]
    exec 7>&-
    wait $SP 2>/dev/null
done

# ---- 2. the virtio-net input IRQ on CPU 3, with receive traffic --------------
# Not kernel-managed: the write is accepted and the IRQ's effective CPU
# follows at its next interrupt. busybox ping to slirp's gateway is
# answered by QEMU itself (no packet leaves the host); -i 0.001 gives
# 540-770 IRQs and as many NET_RX softirqs a second on CPU 3 (6.1, 6.12),
# 335-385 while the traced measure runs (KERNEL-NOTES 36).
N=$(irq_by_name 'virtio[0-9]*-input')
check "the virtio-net input IRQ exists (${N:-none}: $(irq_name "${N:-0}"))" [ -n "$N" ]
if [ -n "$N" ]; then
    NAME=$(irq_name "$N")
    OLD_AFF=$(cat /proc/irq/$N/smp_affinity_list)
    echo $CPU 2>/dev/null >/proc/irq/$N/smp_affinity_list; rc=$?
    check "IRQ $N ($NAME) accepts CPU $CPU (write exit $rc, reads $(cat /proc/irq/$N/smp_affinity_list))" \
        [ $rc -eq 0 -a "$(cat /proc/irq/$N/smp_affinity_list)" = $CPU ]
    taskset -c 0 ping -q -i 0.001 10.0.2.2 >"$OUT/ping.out" 2>&1 &
    PING=$!
    sleep 1
    check "IRQ $N's effective CPU is $CPU once traffic flows ($(cat /proc/irq/$N/effective_affinity_list))" \
        [ "$(cat /proc/irq/$N/effective_affinity_list)" = $CPU ]
    i0=$(awk -v n="$N:" -v c=$COL '$1 == n { print $c }' /proc/interrupts)
    s0=$(awk -v c=$COL '$1 == "NET_RX:" { print $c }' /proc/softirqs)
    t0=$(cut -d' ' -f1 /proc/uptime)
    explain_run irq $IRQ_TH
    i1=$(awk -v n="$N:" -v c=$COL '$1 == n { print $c }' /proc/interrupts)
    s1=$(awk -v c=$COL '$1 == "NET_RX:" { print $c }' /proc/softirqs)
    t1=$(cut -d' ' -f1 /proc/uptime)
    kill $PING 2>/dev/null; wait $PING 2>/dev/null
    echo "$OLD_AFF" >/proc/irq/$N/smp_affinity_list
    rates=$(awk -v i=$((i1 - i0)) -v s=$((s1 - s0)) -v a=$t0 -v b=$t1 'BEGIN { printf "%.0f %.0f", i / (b - a), s / (b - a) }')
    info "during the run: IRQ $N on CPU $CPU ${rates% *}/s, NET_RX on CPU $CPU ${rates#* }/s"
    note "ping -i 0.001 to 10.0.2.2 with IRQ $N ($NAME) on CPU $CPU: ${rates% *} IRQs/s, ${rates#* } NET_RX/s on CPU $CPU"
    # What TCG delivers depends on the host's load: 70/s in CI with the
    # other lane's guest and a build beside it, several hundred when idle.
    # Each sample of the 5 s run meets an interrupt at 20/s already.
    check "traffic reached CPU $CPU (IRQ $N ${rates% *}/s, NET_RX ${rates#* }/s; at least 20/s each)" \
        [ "${rates% *}" -ge 20 -a "${rates#* }" -ge 20 ]
    check "irq: a cause 'IRQ $N $NAME'" has_cause irq "^IRQ $N $NAME\$"
    check "irq: a cause 'softirq NET_RX'" has_cause irq '^softirq NET_RX$'
fi

# ---- 3. SCHED_OTHER load everywhere ------------------------------------------
# stress-ng's workers cannot hold off a SCHED_FIFO thread: whatever the
# explanation, it must not be one of them. (Under TCG with 4 busy vCPUs on
# one host thread most samples are late by milliseconds: the emulator runs
# each vCPU in turn, so the timer interrupt itself comes late.)
stress-ng --cpu 4 --timeout 60 >/dev/null 2>&1 &
LOAD=$!
sleep 2
explain_run load $LOAD_TH
kill $LOAD 2>/dev/null; wait $LOAD 2>/dev/null
top=$(top_cause load)
no_stress() { [ -n "$1" ] && ! matches "$1" '^task stress-ng'; }
check "load: the top cause is no SCHED_OTHER stress-ng worker ('$top')" no_stress "$top"

# started_measure NAME: a 60 s explain run in the background ($M), once its
# instance exists and it has measured 2 s
started_measure() {
    cpushield measure --cpus $CPU --probe timer --interval 1000 --duration 60 --prio 50 \
        --explain $SPIN_TH --json >"$OUT/$1.json" 2>"$OUT/$1.err" </dev/null &
    M=$!
    i=0
    while [ -z "$(ls "$TR/instances")" ] && [ $i -lt 40 ] && kill -0 $M 2>/dev/null; do sleep 0.25; i=$((i + 1)); done
    sleep 2
}

# ---- 4. kill -9 in the middle, then measure --clean-up -----------------------
started_measure killed
kill -9 $M 2>/dev/null
wait $M 2>/dev/null
tsnap killed
info "after kill -9: instances '$(ls "$TR/instances" | tr '\n' ' ')'; differences from before:"
diff "$OUT/trace.before" "$OUT/trace.killed" | grep '^[-+][^-+]' | sed 's/^/    /'
check "after kill -9 a trace instance is left for --clean-up to find ($(ls "$TR/instances" | tr '\n' ' '))" \
    [ -n "$(ls "$TR/instances")" ]
check "no cpushield process is left" [ -z "$(pidof cpushield)" ]
cs measure --clean-up
check "measure --clean-up exits 0" [ "$CS_RC" -eq 0 ]
tsnap cleaned
tsnap_equal before cleaned "after kill -9 and measure --clean-up: tracefs as before the first run"
cs measure --clean-up
check "measure --clean-up with nothing left exits 0" [ "$CS_RC" -eq 0 ]

# ---- 5. Ctrl-C in the middle: the run ends early, reports, and gives back --
started_measure interrupted
kill -INT $M
wait $M; rc=$?
check "Ctrl-C (SIGINT): measure --explain exits 0 with what it has ($rc)" [ "$rc" -eq 0 ]
check "Ctrl-C: the JSON says interrupted and has the explanation" \
    sh -c "grep -q '\"interrupted\": true' '$OUT/interrupted.json' && grep -q '\"explained\":' '$OUT/interrupted.json'"
tsnap interrupted
tsnap_equal before interrupted "after Ctrl-C: tracefs as before the first run"

# ---- 6. kill -9, then the next --explain run cleans up by itself -----------
started_measure killed2
kill -9 $M 2>/dev/null; wait $M 2>/dev/null
check "after another kill -9 the instance is left ($(ls "$TR/instances" | tr '\n' ' '))" [ -n "$(ls "$TR/instances")" ]
cpushield measure --cpus $CPU --duration 1 --explain $SPIN_TH --json >"$OUT/next.json" 2>"$OUT/next.err"; rc=$?
check "the next measure --explain exits 0 ($rc)" [ "$rc" -eq 0 ]
check "it says it removed what the killed run left ($(grep -o '"cleaned": "[^"]*"' "$OUT/next.json"))" grep -q '"cleaned": "removed the trace instance' "$OUT/next.json"
tsnap next
tsnap_equal before next "after kill -9 and the next run: tracefs as before the first run"

# ---- 7. someone else tracing: refused, nothing changed ----------------------
# Another tool's instance (as rtla and trace-cmd -B make): enabling an event
# at the top level instead would expand the top level's buffer for good.
mkdir "$TR/instances/other-tool"
tsnap busy
cs measure --cpus $CPU --duration 1 --explain $SPIN_TH
check "tracefs in use (another tool's instance): measure --explain refused, exit 6 ($CS_RC)" [ "$CS_RC" -eq 6 ]
check "the refusal names the instance" grep -q 'other-tool' "$OUT/cs.out"
tsnap busy.after
check "the refusal changed nothing in tracefs" cmp -s "$OUT/trace.busy" "$OUT/trace.busy.after"
rmdir "$TR/instances/other-tool"
tsnap last
tsnap_equal before last "after the refusal and the other instance removed: tracefs as before the first run"

[ "$HAS_EXPLAIN" = 1 ] || info "(this cpushield has no --explain: the failures above are expected until it lands)"
result
