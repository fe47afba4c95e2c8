#!/bin/sh
# summary: on then off gives back exactly the snapshot before (twice)
# vm: cpus=4
. /guest/lib.sh "$1"
SH=2-3
has_cpushield || { bad "cpushield binary in the guest"; result; }
custom_state
snap before
snap before2; snap_equal before before2 "control: two snapshots with nothing in between are equal"
for round in 1 2; do
    cs on $SH; check "round $round: on $SH exits 0" [ "$CS_RC" -eq 0 ]
    snap during
    info "shielded: $(sh /guest/compare.sh "$OUT/snap.before" "$OUT/snap.during" | grep -c '^changed') snapshot lines changed"
    cs off; check "round $round: off exits 0" [ "$CS_RC" -eq 0 ]
    snap after$round
    snap_equal before after$round "round $round: snapshot after off equals snapshot before on"
done
custom_state_end
result
