#!/bin/sh
# summary: on a kernel booted with isolcpus=domain (the older advice), on 2-3 either makes an isolated partition or is refused with the choices, and nothing is left changed
# vm: cpus=4 boot=domain
. /guest/lib.sh "$1"
SH=2-3
has_cpushield || { bad "cpushield binary in the guest"; result; }
check "/sys/devices/system/cpu/isolated reads 2-3" [ "$(cat /sys/devices/system/cpu/isolated)" = 2-3 ]
snap before
cs on $SH
if [ "$CS_RC" -eq 0 ]; then
    note "booted with isolcpus=domain,2-3: on 2-3 made the partition '$(v2_partitions | awk '{ print $3 }' | head -n1)'"
    cs status; check "status exits 0 (holds)" [ "$CS_RC" -eq 0 ]
    cs run --cpu 3 -- sh -c 'grep Cpus_allowed_list /proc/self/status'
    check "run --cpu 3: CMD on CPU 3 only" grep -q '^Cpus_allowed_list:[[:space:]]*3$' "$OUT/cs.stdout"
    cs off; check "off exits 0" [ "$CS_RC" -eq 0 ]
else
    note "booted with isolcpus=domain,2-3: on 2-3 refused: $(tr '\n' ' ' <"$OUT/cs.out" | cut -c1-300)"
    check "the refusal names the CPUs isolated at boot and the choices" grep -q 'CPUs 2-3 are isolated at boot.*Choices: boot without the domain flag' "$OUT/cs.out"
    check "the refusal rolled back" grep -q 'rolled back' "$OUT/cs.out"
fi
snap after
snap_equal before after "nothing is left changed"
result
