#!/bin/sh
# summary: run --cpu 3 --fifo 80 places CMD; move --in/--out moves every thread; --irq
# vm: cpus=4
. /guest/lib.sh "$1"
SH=2-3; HK=0-1
has_cpushield || { bad "cpushield binary in the guest"; result; }
cs on $SH; check "on $SH exits 0" [ "$CS_RC" -eq 0 ]
part=$(v2_partitions | awk '{ print $1 }' | head -n1)
cs run --cpu 3 --fifo 80 -- sh -c 'grep Cpus_allowed_list /proc/self/status; chrt -p $$; cat /proc/self/cgroup'
check "run exits 0" [ "$CS_RC" -eq 0 ]
check "run: CMD's affinity is CPU 3 only" grep -q '^Cpus_allowed_list:[[:space:]]*3$' "$OUT/cs.stdout"
check "run: CMD is SCHED_FIFO" grep -q 'policy: SCHED_FIFO' "$OUT/cs.stdout"
check "run: CMD has priority 80" grep -q 'priority: 80' "$OUT/cs.stdout"
[ -n "$part" ] && check "run: CMD is in the shield's cgroup ($part or below)" grep -Eq "^0::$part(/|$)" "$OUT/cs.stdout"
cs run -- sh -c 'exit 7'
check "run passes the exit code through (7)" [ "$CS_RC" -eq 7 ]
cs run -- sh -c 'grep Cpus_allowed_list /proc/self/status'
check "run without --cpu: CMD on the shield's CPUs ($SH)" grep -q "^Cpus_allowed_list:[[:space:]]*$SH$" "$OUT/cs.stdout"

# move a multi-threaded process in and out
cyclictest -q -t3 -i 20000 -D 100000 >/dev/null 2>&1 &
P=$!
sleep 2
nthr=$(ls /proc/$P/task | wc -l)
info "cyclictest pid $P with $nthr threads: $(cat /proc/$P/task/*/status | awk '/^Cpus_allowed_list/ { printf "%s ", $2 }')"
threads_in() { # threads_in CPUS [CGROUP]: every thread of P on CPUS (and in CGROUP)
    local t c
    for t in /proc/$P/task/*; do
        c=$(awk '/^Cpus_allowed_list/ { print $2 }' $t/status)
        cpus_subset "$c" "$1" || { info "thread ${t##*/} on $c"; return 1; }
        if [ -n "${2:-}" ]; then grep -Eq "^0::$2(/|$)" $t/cgroup || { info "thread ${t##*/} in $(cat $t/cgroup)"; return 1; }; fi
    done
}
cs move $P --in; check "move --in exits 0" [ "$CS_RC" -eq 0 ]
check "move --in: all $nthr threads on $SH${part:+ and in $part}" threads_in $SH "$part"
cs move $P --out; check "move --out exits 0" [ "$CS_RC" -eq 0 ]
check "move --out: all $nthr threads on $HK" threads_in $HK
if [ -n "$part" ]; then
    check "move --out: no thread left in $part" sh -c "! grep -Eq '^0::$part(/|\$)' /proc/$P/task/*/cgroup"
fi
kill $P; wait $P 2>/dev/null
cs off; check "off exits 0" [ "$CS_RC" -eq 0 ]

# --irq: an IRQ the task uses goes into the shield
n=$(irq_by_name 'virtio1-input')
if [ -n "$n" ]; then
    REFUSING=$(refusing_irqs)
    cs on $SH --irq "$(irq_name "$n")"; check "on $SH --irq $(irq_name "$n") exits 0" [ "$CS_RC" -eq 0 ]
    cp "$OUT/cs.out" "$OUT/on-irq.out"
    a=$(cat /proc/irq/$n/smp_affinity_list)
    check "--irq by name: IRQ $n ($(irq_name "$n")) is inside $SH ($a)" cpus_subset "$a" $SH
    assert_shield $SH "$OUT/on-irq.out" "" "$REFUSING" "$n"
    cs off; check "off exits 0" [ "$CS_RC" -eq 0 ]
    cs on $SH --irq "$n"; check "on $SH --irq $n (by number) exits 0" [ "$CS_RC" -eq 0 ]
    a=$(cat /proc/irq/$n/smp_affinity_list)
    check "--irq by number: IRQ $n is inside $SH ($a)" cpus_subset "$a" $SH
    cs off; check "off exits 0" [ "$CS_RC" -eq 0 ]
fi
result
