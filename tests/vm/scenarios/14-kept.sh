#!/bin/sh
# summary: tasks that asked only for shielded CPUs before on keep exactly their CPUs, inside the shield's cgroup, reported as kept; off restores them; with --force they go to the housekeeping CPUs
# vm: cpus=4
. /guest/lib.sh "$1"
SH=2-3; HK=0-1
has_cpushield || { bad "cpushield binary in the guest"; result; }
taskset -c 3 sleep 600 &
S=$!
taskset -c 2-3 cyclictest -q -t2 -a2,3 -i 20000 -D 600 >/dev/null 2>&1 &
C=$!
sleep 2
own() { for t in /proc/$1/task/*; do echo "${t##*/} $(awk '/^Cpus_allowed_list/ { print $2 }' $t/status)"; done; }
cg_of() { grep -E '^0::|:cpuset:' /proc/$1/task/$2/cgroup | head -n1 | cut -d: -f3; }
own $S >"$OUT/own"; own $C >>"$OUT/own"
info "before on: $(tr '\n' ' ' <"$OUT/own")(sleep $S, cyclictest $C)"
orig=$(cg_of $S $S)
snap before
cs on $SH; check "on $SH exits 0" [ "$CS_RC" -eq 0 ]
check "on reports tasks kept on the shield" grep -q "kept on the shield" "$OUT/cs.stdout"
for p in $S $C; do
    check "on lists process $p as kept" grep -Eq "^ +$p +[0-9]+ +(sleep|cyclictest)" "$OUT/cs.stdout"
done
while read -r tid cpus; do
    p=$S; [ -d /proc/$S/task/$tid ] || p=$C
    now=$(awk '/^Cpus_allowed_list/ { print $2 }' /proc/$p/task/$tid/status)
    check "while shielded, thread $tid has exactly its own CPUs ($cpus; has $now)" [ "$now" = "$cpus" ]
    cg=$(cg_of $p $tid)
    check "while shielded, thread $tid is inside the shield's cgroup ($cg)" sh -c "echo '$cg' | grep -q '^/cpushield'"
done <"$OUT/own"
cs off; check "off exits 0" [ "$CS_RC" -eq 0 ]
while read -r tid cpus; do
    p=$S; [ -d /proc/$S/task/$tid ] || p=$C
    now=$(awk '/^Cpus_allowed_list/ { print $2 }' /proc/$p/task/$tid/status)
    check "after off, thread $tid has its own CPUs again ($cpus; has $now)" [ "$now" = "$cpus" ]
    check "after off, thread $tid is back in $orig ($(cg_of $p $tid))" [ "$(cg_of $p $tid)" = "$orig" ]
done <"$OUT/own"
snap after; snap_equal before after "after off: snapshot equals the one before"
cs on $SH --force; check "on --force exits 0" [ "$CS_RC" -eq 0 ]
check "on --force keeps nothing on the shield" sh -c "! grep -q 'kept on the shield' '$OUT/cs.stdout'"
while read -r tid cpus; do
    p=$S; [ -d /proc/$S/task/$tid ] || p=$C
    now=$(awk '/^Cpus_allowed_list/ { print $2 }' /proc/$p/task/$tid/status)
    check "with --force, thread $tid is on the housekeeping CPUs (has $now)" cpus_subset "$now" $HK
done <"$OUT/own"
cs off; check "off exits 0" [ "$CS_RC" -eq 0 ]
snap after2; snap_equal before after2 "after on --force and off: snapshot equals the one before"
cs off; check "off with nothing to undo exits 0" [ "$CS_RC" -eq 0 ]
check "off with nothing to undo says so on one line" sh -c "[ \"\$(cat '$OUT/cs.stdout')\" = 'no shield active: nothing to undo' ]"
kill $S $C 2>/dev/null
wait
result
