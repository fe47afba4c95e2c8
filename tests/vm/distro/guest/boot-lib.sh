# Helpers of the boot-half scenarios (sourced after lib.sh): the options
# the boot half writes, the running command line and sysfs, and cpushield's
# own word on the boot half (verify --json, boot --json, the metric).

# What the boot half writes for CPUs 2-3, then for CPU 3 (4 vCPUs): no
# `domain` flag (the shield's isolated partition does that at run time;
# tests/vm/KERNEL-NOTES.md, "Booted with isolcpus"), so
# /sys/devices/system/cpu/isolated stays empty.
OPTS23="isolcpus=managed_irq,2-3 nohz_full=2-3 rcu_nocbs=2-3 irqaffinity=0-1"
OPTS3="isolcpus=managed_irq,3 nohz_full=3 rcu_nocbs=3 irqaffinity=0-2"
CONF=/etc/cpushield/cpushield.toml

# has_all TEXT WORDS: every one of WORDS is a word of TEXT
has_all() { for w in $2; do echo " $1 " | tr '\t' ' ' | grep -qF " $w " || return 1; done; }
# has_none TEXT: no isolation option (isolcpus=, nohz_full=, rcu_nocbs=, irqaffinity=) in TEXT
has_none() { ! echo " $1 " | tr '\t' ' ' | grep -qE ' (isolcpus|nohz_full|rcu_nocbs|irqaffinity)='; }
# keys_once TEXT: each isolation key at most once in TEXT
keys_once() {
    for k in isolcpus nohz_full rcu_nocbs irqaffinity; do
        [ "$(echo " $1 " | tr ' \t' '\n\n' | grep -c "^$k=")" -le 1 ] || return 1
    done
}
cmdline() { cat /proc/cmdline; }
# sysfs FILE: a CPU list under /sys/devices/system/cpu ("" for none: nohz_full reads "(null)" then)
sysfs() { cat "/sys/devices/system/cpu/$1" 2>/dev/null | sed 's/^(null)$//'; }
# csj NAME ARGS: cpushield ARGS with its JSON in $OUT/NAME.json, exit code in CS_RC
csj() {
    f=$OUT/$1.json; shift
    info "cpushield $* > $(basename "$f")"
    /job/cpushield "$@" >"$f" 2>"$f.err"; CS_RC=$?
    sed 's/^/    ! /' "$f.err" | head -n 5
}
# bstate FILE: the boot half's state in cpushield's JSON (verify: .boot.state; boot: .state)
bstate() {
    python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
b = d["boot"] if isinstance(d.get("boot"), dict) else d
print(b.get("state", ""))' "$1" 2>/dev/null
}
# boot_state_is STATE: verify --json and boot --json both say STATE
boot_state_is() {
    csj verify verify --json; v=$(bstate "$OUT/verify.json")
    csj boot boot --json; b=$(bstate "$OUT/boot.json")
    info "boot half: verify --json says '$v', boot --json says '$b'"
    [ "$v" = "$1" ] && [ "$b" = "$1" ]
}
reboot_pending_metric() { cs metrics; grep -qx "cpushield_boot_reboot_pending $1" "$OUT/cs.out"; }
