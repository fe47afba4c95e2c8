#!/bin/sh
# summary: children forked (continuously) after on never get 2-3, even via taskset
# vm: cpus=4
. /guest/lib.sh "$1"
SH=2-3
has_cpushield || { bad "cpushield binary in the guest"; result; }
children_check $SH
cs off; check "off exits 0" [ "$CS_RC" -eq 0 ]
result
