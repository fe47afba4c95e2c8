#!/bin/sh
# summary: the rtc probe against the guest's CMOS RTC (/dev/rtc0), and the timer probe on the same CPU in the same boot; both run (not skipped) and fill cyclictest histogram files; the figures are printed (emulated timing: no limit asserted)
# vm: cpus=4 kernels=6.12
. /guest/lib.sh "$1"
has_cpushield || { bad "cpushield binary in the guest"; result; }
CPU=$((NCPUS - 1))
SAMPLES=1000
check "the guest has an RTC device (/dev/rtc0)" [ -c /dev/rtc0 ]
info "RTC: $(cat /sys/class/rtc/rtc0/name 2>/dev/null), IRQ 8 affinity $(cat /proc/irq/8/smp_affinity_list 2>/dev/null)"
for probe in rtc timer; do
    cpushield measure --probe $probe --cpus $CPU --loops $SAMPLES \
        --histfile "$OUT/$probe.hist" >"$OUT/$probe.out" 2>&1
    rc=$?
    sed 's/^/  | /' "$OUT/$probe.out" | head -14
    check "measure --probe $probe exits 0" [ $rc -eq 0 ]
    check "the $probe probe ran (not skipped)" sh -c "! grep -qi skipped '$OUT/$probe.out'"
    read -r total min avg max <<EOF2
$(awk 'function num(s) { sub(/^0+/, "", s); return s + 0 }  # busybox awk reads 0-led numbers as octal
       /^# Total:/ {t = num($3)} /^# Min Latencies:/ {mn = num($4)}
       /^# Avg Latencies:/ {av = num($4)} /^# Max Latencies:/ {mx = num($4)}
       END {print t + 0, mn + 0, av + 0, mx + 0}' "$OUT/$probe.hist" 2>/dev/null)
EOF2
    # Total counts the samples inside the histogram's range (cyclictest's
    # format); the overflows are the rest.
    over=$(awk '/^# Histogram Overflows:/ {s = $4; sub(/^0+/, "", s); print s + 0}' "$OUT/$probe.hist")
    check "$probe: $SAMPLES samples in its histogram file ($total in range, ${over:-?} over)" \
        [ $(( ${total:-0} + ${over:-0} )) -eq $SAMPLES ]
    note "$probe probe, CPU $CPU, $SAMPLES samples: min $min, avg $avg, max $max µs"
done
result
