#!/bin/sh
# summary: on PREEMPT_RT with stalld installed, `on 2-3 --dry-run` lists
#   every change beyond the shielded CPUs with how to do without it (the
#   starvation guard) and changes nothing; a plain `on 2-3` makes only the
#   changes listed: RT throttling, the scheduler's features and the
#   watchdogs stay as they were, the guard boosts with its own loop, not
#   stalld; naming rt-throttling is what lets stalld boost, and the dry
#   run says so first; off gives the snapshot back. Debian 13 packages no
#   stalld: the scenario puts a stand-in where cpushield looks for it
#   (/usr/bin/stalld), which is all cpushield's choice depends on.
# distro: suites=trixie-rt default=no
. /job/lib.sh "$1"
field() { # field FILE PYTHON-EXPRESSION-OF-j
    python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print($2)" "$1" 2>/dev/null
}
check "the kernel is PREEMPT_RT" grep -q PREEMPT_RT /proc/sys/kernel/version
printf '#!/bin/sh\n# cpushield test stand-in\nexec sleep infinity\n' >/usr/bin/stalld
chmod 0755 /usr/bin/stalld
RT_BEFORE=$(cat /proc/sys/kernel/sched_rt_runtime_us)
FEAT=/sys/kernel/debug/sched/features
FEAT_BEFORE=$(cat "$FEAT" 2>/dev/null)
irqbalance_settle
snap before

# 1. The dry run: the machine-wide changes, each with how to do without.
cs on 2-3 --dry-run --json
cp "$OUT/cs.out" "$OUT/dry.json"
check "on --dry-run exits 0 ($CS_RC)" [ "$CS_RC" = 0 ]
info "machine-wide: $(field "$OUT/dry.json" "'; '.join(m['component']+': '+m['what']+' (without: '+m['without']+')' for m in j['machine_wide'])")"
check "the dry run lists the starvation guard with how to do without it" \
    [ "$(field "$OUT/dry.json" "any(m['component']=='guard' and m['without'] for m in j['machine_wide'])")" = True ]
check "the dry run plans no write to RT throttling" \
    [ "$(field "$OUT/dry.json" "any('sched_rt_runtime_us' in json.dumps(s) for s in (j['plan'] or []))")" = False ]
check "the dry run plans no scheduler feature" \
    [ "$(field "$OUT/dry.json" "any('sched/features' in json.dumps(s) for s in (j['plan'] or []))")" = False ]
irqbalance_settle
snap after.dry
snap_equal before after.dry "the dry run changed nothing"

# 2. Naming rt-throttling: the dry run says throttling goes and stalld boosts.
cs on 2-3 --dry-run --tune=rt-throttling --json
cp "$OUT/cs.out" "$OUT/dry-rt.json"
check "named, the dry run writes RT throttling off" \
    [ "$(field "$OUT/dry-rt.json" "any('sched_rt_runtime_us' in json.dumps(s) for s in (j['plan'] or []))")" = True ]
info "named, the guard's engine: $(grep -o '"engine": *"[a-z]*"' "$OUT/dry-rt.json" | sort -u | tr '\n' ' ')"
check "named, stalld boosts" grep -q '"engine": *"stalld"' "$OUT/dry-rt.json"

# 3. A plain on makes only what the dry run listed.
cs on 2-3 --json
cp "$OUT/cs.out" "$OUT/on.json"
check "on exits 0 ($CS_RC)" [ "$CS_RC" = 0 ]
check "RT throttling as before ($RT_BEFORE)" [ "$(cat /proc/sys/kernel/sched_rt_runtime_us)" = "$RT_BEFORE" ]
check "the scheduler's features as before" [ "$(cat "$FEAT" 2>/dev/null)" = "$FEAT_BEFORE" ]
check "the guard runs as cpushield-guard.service" [ "$(systemctl is-active cpushield-guard.service)" = active ]
GUARD_CMD=$(tr '\0' ' ' </proc/"$(systemctl show -p MainPID --value cpushield-guard.service)"/cmdline)
info "the guard: $GUARD_CMD"
check "the guard boosts with its own loop, not stalld" eval 'echo "$GUARD_CMD" | grep -q -- --guard-engine=cpushield'
check "no stalld was started" eval '! pgrep -x stalld >/dev/null'
ON_MW=$(field "$OUT/on.json" "sorted(m['component']+': '+m['what'] for m in j['machine_wide'])")
DRY_MW=$(field "$OUT/dry.json" "sorted(m['component']+': '+m['what'] for m in j['machine_wide'])")
info "made machine-wide: $ON_MW"
check "on made the machine-wide changes the dry run listed, no other" [ "$ON_MW" = "$DRY_MW" ]
cs off
check "off exits 0 ($CS_RC)" [ "$CS_RC" = 0 ]
irqbalance_settle
snap after.off
snap_equal_after_irqbalance before after.off "after off: everything as before"
rm -f /usr/bin/stalld
result
