#!/bin/sh
# summary: a damaged journal does not strand the machine: with state.json cut short, status refuses naming off, and off restores everything the records hold (exit 5, the machine equals the snapshot before on); with a segment cut at several offsets, off restores the records before the cut and names the rest; a garbled record is never acted on
# vm: cpus=4 kernels=6.12
. /guest/lib.sh "$1"
SH=2-3
J=/run/cpushield/journal
has_cpushield || { bad "cpushield binary in the guest"; result; }
snap before

# ---- state.json cut short --------------------------------------------------
for cut in 0 1 100; do
    cs on $SH --tune; check "state cut at $cut: on exits 0" [ "$CS_RC" -eq 0 ]
    check "state cut at $cut: the journal has segments ($(ls $J | tr '\n' ' '))" [ -n "$(ls $J/0*.json 2>/dev/null)" ]
    head -c $cut $J/state.json >/tmp/state.cut && cat /tmp/state.cut >$J/state.json
    cs status
    check "state cut at $cut: status refuses (exit $CS_RC) and points to off" sh -c "[ $CS_RC -ne 0 ] && grep -q 'off' '$OUT/cs.stdout' '$OUT/cs.stderr' 2>/dev/null"
    cs off
    check "state cut at $cut: off exits 5 (exit $CS_RC)" [ "$CS_RC" -eq 5 ]
    snap after.state$cut
    snap_equal before after.state$cut "state cut at $cut: the machine equals the snapshot before on"
    # what is left (a journal set aside) is not a shield: on works again
    rm -rf /run/cpushield/journal.damaged
done

# ---- one segment cut at several offsets -------------------------------------
# keys FILE: what a compare.sh listing says changed, one key a line
keys() { sed -n 's/^changed: *\(.*\) (.*/\1/p; s/^only [a-z]*: *\(.*\) = .*/\1/p' "$1" | sort -u; }
for at in 50 400 half; do
    snap r$at.before
    cs on $SH --tune; check "segment cut at $at: on exits 0" [ "$CS_RC" -eq 0 ]
    snap r$at.during
    rm -rf /tmp/journal.full; cp -a $J /tmp/journal.full
    seg=$(ls $J/0*.json | tail -n 1)
    size=$(wc -c <"$seg")
    n=$at; [ "$at" = half ] && n=$((size / 2))
    # A last segment shorter than the offset is cut at three quarters.
    [ "$n" -lt "$size" ] || n=$((size * 3 / 4))
    head -c $n "$seg" >/tmp/seg.cut && cat /tmp/seg.cut >"$seg"
    cs off
    info "segment $(basename "$seg") of $size bytes cut at $n: off exit $CS_RC"
    check "segment cut at $at: off exits 5, naming what it could not read (exit $CS_RC)" [ "$CS_RC" -eq 5 ]
    snap r$at.after
    # The records after the cut are lost and their changes stay; nothing
    # else may differ: every difference left is one that on made.
    sh /guest/compare.sh "$OUT/snap.r$at.before" "$OUT/snap.r$at.during" >"$OUT/diff.r$at.on" || true
    sh /guest/compare.sh "$OUT/snap.r$at.before" "$OUT/snap.r$at.after" >"$OUT/diff.r$at.left" || true
    keys "$OUT/diff.r$at.on" >"$OUT/keys.r$at.on"
    keys "$OUT/diff.r$at.left" >"$OUT/keys.r$at.left"
    stray=$(awk 'NR == FNR { on[$0] = 1; next } !($0 in on)' "$OUT/keys.r$at.on" "$OUT/keys.r$at.left" | head -n 5 | tr '\n' ';')
    info "segment cut at $at: $(grep -c '' "$OUT/keys.r$at.left") of $(grep -c '' "$OUT/keys.r$at.on") changes of on left (records after the cut)"
    check "segment cut at $at: off changed nothing on did not change (${stray:-none})" [ -z "$stray" ]
    # The intact journal put back: off restores the rest, and what the
    # first off restored already reads as before.
    rm -rf $J /run/cpushield/journal.damaged
    cp -a /tmp/journal.full $J
    cs off
    check "segment cut at $at: off over the intact journal then exits 0 (exit $CS_RC)" [ "$CS_RC" -eq 0 ]
    snap r$at.clean
    snap_equal r$at.before r$at.clean "segment cut at $at: after it, the machine equals the snapshot before on"
done
result
