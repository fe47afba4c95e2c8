#!/bin/sh
# summary: an upgrade in the middle of a shield: the cpushield of journal version 1 makes a shield with the knobs and the starvation guard (a component's own change, written at the top level of its entry); the new cpushield reads that journal (status: it holds), then off undoes it exactly (the guard's process gone, the snapshot equals the one before on)
# vm: cpus=4 kernels=6.12
. /guest/lib.sh "$1"
SH=2-3
OLD=/usr/local/bin/cpushield-journal-v1
J=/run/cpushield/journal
has_cpushield || { bad "cpushield binary in the guest"; result; }
# CI builds it (tests/vm/build-journal-v1.sh, from ci.sh); by hand it is
# built beside the binary given: tests/vm/build-journal-v1.sh DIR/previous
[ -x $OLD ] || skip "no $OLD (tests/vm/build-journal-v1.sh BINARY_DIR/previous)"
guard_pids() {
    for d in /proc/[0-9]*; do
        [ "$(cat "$d/comm" 2>/dev/null)" = cpushield-guard ] && echo "${d#/proc/}"
    done
}
custom_state
snap before

echo "\$ cpushield-journal-v1 on $SH --tune --guard=on"
$OLD on $SH --tune --guard=on >"$OUT/old.out" 2>&1; rc=$?
sed 's/^/  | /' "$OUT/old.out" | head -30; echo "  exit $rc"
check "the old cpushield makes the shield (exit 0)" [ "$rc" -eq 0 ]
check "its journal is of version 1" grep -q '"version": *1,' $J/state.json
check "the guard's entry is at the top level, under its own tag (version 1)" grep -q '"action":"guard"' $J/0*.json
check "no entry names its component (version 1)" sh -c "! grep -q '\"by\":' $J/0*.json"
GUARD=$(guard_pids)
check "the old cpushield started the guard (pid '$GUARD')" [ -n "$GUARD" ]

cs status; check "the new cpushield reads the old journal: status exits 0 (the shield holds)" [ "$CS_RC" -eq 0 ]
check "status: the shield on CPUs $SH holds" grep -q "shield on CPUs $SH: holds" "$OUT/cs.out"
cs off; check "the new cpushield's off exits 0" [ "$CS_RC" -eq 0 ]
check "the guard's process is gone" [ -z "$(guard_pids)" ]
check "no journal is left" [ ! -e $J/state.json ]
snap after
snap_equal before after "made by the old cpushield, undone by the new: the snapshot equals the one before on"
custom_state_end
result
