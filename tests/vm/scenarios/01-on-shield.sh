#!/bin/sh
# summary: on 2-3: tasks, IRQs, default affinity, workqueues off 2-3; partition valid
# vm: cpus=4
. /guest/lib.sh "$1"
SH=2-3
has_cpushield || { bad "cpushield binary in the guest"; result; }
REFUSING=$(refusing_irqs)
note "IRQs that refuse a new affinity (own value written back): $(for n in $REFUSING; do printf '%s(%s) ' "$n" "$(irq_name "$n")"; done)"
dd if=/dev/vda of=/dev/null bs=64k count=32 2>/dev/null
cs on $SH; check "on $SH exits 0" [ "$CS_RC" -eq 0 ]
cp "$OUT/cs.out" "$OUT/on.out"
assert_shield $SH "$OUT/on.out" "" "$REFUSING"
cs status --json; check "status --json exits 0" [ "$CS_RC" -eq 0 ]
check "status --json prints a JSON object" grep -q '^ *{' "$OUT/cs.stdout"
cs off; check "off exits 0" [ "$CS_RC" -eq 0 ]
case $(cgroup_mode) in v2) check "no partition left after off" [ -z "$(v2_partitions)" ] ;; esac
result
