# Guest-side helpers for scenarios (busybox sh).  Sourced by every scenario:
#   . /guest/lib.sh "$1"
# Output protocol on the serial console (read by tests/vm/run.sh):
#   CPUSHIELD-CHECK: ok|FAIL <what>      one assertion
#   CPUSHIELD-NOTE: <text>               a kernel behaviour worth recording
#   CPUSHIELD-RESULT: PASS|FAIL|SKIP <scenario> <details>   last line

SCEN=${1:-$(basename "$0" .sh)}
CHECKS=0
FAILED=0
OUT=/results/$SCEN
mkdir -p "$OUT"
KVER=$(uname -r)
case $KVER in 6.1.*) KSERIES=6.1 ;; 6.12.*) KSERIES=6.12 ;; *) KSERIES=$KVER ;; esac
NCPUS=$(nproc)

# el: seconds since the scenario began (a scenario that nears its time
# limit shows where the time went)
T0=$(cut -d. -f1 /proc/uptime)
el() { echo "$(( $(cut -d. -f1 /proc/uptime) - T0 ))s"; }
ok()   { CHECKS=$((CHECKS + 1)); echo "CPUSHIELD-CHECK: ok   $* [$(el)]"; }
bad()  { CHECKS=$((CHECKS + 1)); FAILED=$((FAILED + 1)); echo "CPUSHIELD-CHECK: FAIL $* [$(el)]"; }
note() { echo "CPUSHIELD-NOTE: [$KSERIES] $*"; }
# snote: a note about the shield's effect, only while 'on' has succeeded
SHIELD_ON=0
snote() { [ "$SHIELD_ON" = 1 ] && note "$@"; true; }
info() { echo "  $*"; }

# check WHAT CMD...: ok when CMD exits 0
check() { local what=$1; shift; if "$@"; then ok "$what"; else bad "$what"; fi; }

result() {
    local r=PASS
    [ "$FAILED" -gt 0 ] && r=FAIL
    [ "$CHECKS" -eq 0 ] && r=FAIL
    echo "$r" >"/results/$SCEN.result"
    echo "CPUSHIELD-RESULT: $r $SCEN ($CHECKS checks, $FAILED failed)"
    exit 0
}
skip() {
    echo SKIP >"/results/$SCEN.result"
    echo "CPUSHIELD-RESULT: SKIP $SCEN $*"
    exit 0
}

# cs ARGS...: run cpushield, show command, output and exit code.
# Sets CS_RC; output in $OUT/cs.out (stdout+stderr), stdout alone in $OUT/cs.stdout.
CS_N=0
cs() {
    CS_N=$((CS_N + 1))
    echo "\$ cpushield $*"
    cpushield "$@" >"$OUT/cs.stdout" 2>"$OUT/cs.stderr" </dev/null
    CS_RC=$?
    case "$1:$CS_RC" in on:0) SHIELD_ON=1 ;; off:0) SHIELD_ON=0 ;; esac
    cat "$OUT/cs.stdout" "$OUT/cs.stderr" >"$OUT/cs.out"
    cp "$OUT/cs.out" "$OUT/cs.$CS_N.out"
    sed 's/^/  | /' "$OUT/cs.out" | head -n "${CS_SHOW:-60}"
    echo "  exit $CS_RC"
    return $CS_RC
}

# export_files PATH...: copy files or directories to the host; they come
# back in tests/vm/work/<run>/export/<kernel>/<scenario>/ (and --export DIR)
export_files() {
    mkdir -p "/results/export/$SCEN"
    cp -r "$@" "/results/export/$SCEN/"
}

# ---- cpu lists -------------------------------------------------------------
# awk functions shared by the checks: expand("0-2,5") -> " 0 1 2 5 "
AWK_CPULIB='
function expand(l,   n, i, a, r, lo, hi, c, out) {
    out = " "; if (l == "" || l == "(null)") return out
    n = split(l, a, ",")
    for (i = 1; i <= n; i++) {
        if (split(a[i], r, "-") == 2) { lo = r[1] + 0; hi = r[2] + 0 } else { lo = a[i] + 0; hi = lo }
        for (c = lo; c <= hi; c++) out = out c " "
    }
    return out
}
function overlap(a, b,   n, i, x) {   # a, b cpulists; 1 if they share a CPU
    a = expand(a); b = expand(b); n = split(a, x, " ")
    for (i = 1; i <= n; i++) if (x[i] != "" && index(b, " " x[i] " ")) return 1
    return 0
}
function subset(a, b,   n, i, x) {    # every CPU of a is in b
    a = expand(a); b = expand(b); n = split(a, x, " ")
    for (i = 1; i <= n; i++) if (x[i] != "" && !index(b, " " x[i] " ")) return 0
    return 1
}'
cpus_overlap() { awk -v a="$1" -v b="$2" "$AWK_CPULIB"' BEGIN { exit !overlap(a, b) }'; }
cpus_subset()  { awk -v a="$1" -v b="$2" "$AWK_CPULIB"' BEGIN { exit !subset(a, b) }'; }
cpus_equal()   { cpus_subset "$1" "$2" && cpus_subset "$2" "$1"; }
# hex mask ("f", "00000000,0000000c") -> cpulist
mask_to_list() {
    echo "$1" | tr -d ',' | awk '{
        s = tolower($0); n = length(s); out = ""; cpu = 0
        for (i = n; i >= 1; i--) {
            d = index("0123456789abcdef", substr(s, i, 1)) - 1
            for (b = 0; b < 4; b++) { if (d % 2) out = out (out == "" ? "" : ",") cpu; d = int(d / 2); cpu++ }
        }
        print out }'
}
all_cpus() { cat /sys/devices/system/cpu/online; }
# complement of a cpulist within the online CPUs
cpus_minus() { awk -v a="$1" -v b="$2" "$AWK_CPULIB"' BEGIN {
    n = split(expand(a), x, " "); b = expand(b); o = ""
    for (i = 1; i <= n; i++) if (x[i] != "" && !index(b, " " x[i] " ")) o = o (o == "" ? "" : ",") x[i]
    print o }'; }

# ---- tasks -----------------------------------------------------------------
# tasks_table: "TID TGID PPID CPUS NAME" for every thread (one awk over all
# status files: the only extra tasks are this shell's children).
tasks_table() {
    awk '
    function flush() { if (tid != "") print tid, tgid, ppid, cpus, name; tid = tgid = ppid = cpus = name = "" }
    FNR == 1 { flush() }
    /^Name:/ { name = $0; sub(/^Name:[ \t]*/, "", name) }
    /^Pid:/ { tid = $2 }
    /^Tgid:/ { tgid = $2 }
    /^PPid:/ { ppid = $2 }
    /^Cpus_allowed_list:/ { cpus = $2 }
    END { flush() }' /proc/[0-9]*/task/[0-9]*/status 2>/dev/null
}
# Per-CPU kernel threads that a shield reports by kind instead of moving.
PERCPU_KTHREADS='^(ksoftirqd/|migration/|cpuhp/|kworker/[0-9]+:|rcuc/|rcuop/|rcuog/|idle_inject/|watchdog/|irq_work/|posixcputmr/|irq/|swapper/)'

# ---- irqs ------------------------------------------------------------------
irq_name() { # irq_name N -> the action name (last column) of /proc/interrupts
    awk -v n="$1:" '$1 == n { print $NF; exit }' /proc/interrupts
}
irq_list() { for d in /proc/irq/[0-9]*; do [ -f "$d/smp_affinity_list" ] && echo "${d##*/}"; done | sort -n; }
# IRQs that refuse a new affinity: write each one's own value back.
refusing_irqs() {
    local n v
    for n in $(irq_list); do
        v=$(cat /proc/irq/$n/smp_affinity_list 2>/dev/null) || continue
        if ! echo "$v" 2>/dev/null >/proc/irq/$n/smp_affinity_list; then echo "$n"; fi
    done
}
# irq number by name pattern from /proc/interrupts (first match)
irq_by_name() { awk -v p="$1" '$NF ~ p { sub(":", "", $1); print $1; exit }' /proc/interrupts; }

# ---- cgroups ---------------------------------------------------------------
cgroup_mode() {
    if [ -f /sys/fs/cgroup/cgroup.controllers ]; then echo v2
    elif [ -f /sys/fs/cgroup/cpuset/cpuset.cpus ]; then echo v1
    else echo none; fi
}
# v2: directories holding a partition ("path partition-state effective-cpus")
v2_partitions() {
    find /sys/fs/cgroup -mindepth 1 -name cpuset.cpus.partition 2>/dev/null | while read -r f; do
        d=${f%/cpuset.cpus.partition}
        p=$(cat "$f")
        [ "$p" = member ] && continue
        echo "${d#/sys/fs/cgroup} $(cat "$d/cpuset.cpus.effective") $p"
    done
}

# ---- snapshots -------------------------------------------------------------
snap() { sh /guest/snapshot.sh >"$OUT/snap.$1"; }
# snap_equal A B WHAT: compare two snapshots; prints the differences
snap_equal() {
    if sh /guest/compare.sh "$OUT/snap.$1" "$OUT/snap.$2" >"$OUT/diff.$1.$2"; then
        ok "$3"
        return 0
    fi
    bad "$3"
    sed 's/^/    /' "$OUT/diff.$1.$2" | head -n 60
    return 1
}

# a tiny probe: print own affinity (used as a forked child)
self_cpus() { awk '/^Cpus_allowed_list:/ { print $2 }' /proc/self/status; }

has_cpushield() { command -v cpushield >/dev/null 2>&1; }

# ---- the shared assertions -------------------------------------------------
# assert_shield SHIELD ON_OUTPUT EXEMPT_TIDS REFUSING_IRQS [IRQS_IN]
#   every task off SHIELD except per-CPU kthreads, EXEMPT_TIDS, and tasks the
#   tool's output names (pid and name); every IRQ that accepts an affinity
#   off SHIELD (IRQS_IN: inside it); refusing IRQs named in the output by
#   number and name; default affinity and workqueue mask off SHIELD; the
#   partition (v2) or the rt cpuset (v1) reads back valid.
assert_shield() {
    local sh=$1 outf=$2 exempt refusing irqs_in hk bad_tasks n a name kinds kind
    exempt=" $(echo $3) "; refusing=" $(echo $4) "; irqs_in=" $(echo ${5:-}) "
    hk=$(cpus_minus "$(all_cpus)" "$sh")
    # -- tasks
    tasks_table >"$OUT/tasks.after-on"
    : >"$OUT/tasks.inside"
    bad_tasks=0
    while read -r tid tgid ppid cpus name; do
        cpus_overlap "$cpus" "$sh" || continue
        case "$exempt" in *" $tid "*|*" $tgid "*) echo "placed $tid $name $cpus" >>"$OUT/tasks.inside"; continue ;; esac
        if [ "$ppid" = 2 ] || [ "$tid" = 2 ]; then
            case $name in
                kworker/R-*)
                    # 6.12 rescuers of per-CPU workqueues: on every CPU and
                    # unmovable; they must be reported, by thread or by kind
                    if grep -qF "kworker/R" "$outf"; then
                        echo "kthread $tid $name $cpus" >>"$OUT/tasks.inside"; continue
                    fi ;;
                *)
                    if echo "$name" | grep -Eq "$PERCPU_KTHREADS"; then
                        echo "kthread $tid $name $cpus" >>"$OUT/tasks.inside"; continue
                    fi
                    # other kthreads the kernel keeps there (unbound workers,
                    # 6.1 rescuers, v1 tasks refusing the cgroup move): they
                    # must be reported, by thread or by kind
                    kind=${name%%[/:]*}; kind=${kind%%-*}
                    if grep -qF "$kind" "$outf"; then
                        echo "reported-kind $tid $name $cpus" >>"$OUT/tasks.inside"; continue
                    fi ;;
            esac
        fi
        if { grep -qw "$tid" "$outf" || grep -qw "$tgid" "$outf"; } && grep -qF "$name" "$outf"; then
            echo "reported $tid $name $cpus" >>"$OUT/tasks.inside"; continue
        fi
        bad_tasks=$((bad_tasks + 1))
        info "on the shield: tid $tid (tgid $tgid, ppid $ppid) '$name' cpus $cpus"
    done <"$OUT/tasks.after-on"
    kinds=$(awk '$1 == "kthread" { n = $3; sub(/[\/:].*/, "", n); sub(/-.*/, "", n); k[n]++ } END { for (x in k) printf "%s%s x%d", (s++ ? ", " : ""), x, k[x] }' "$OUT/tasks.inside")
    info "left on the shield: kernel threads by kind: ${kinds:-none}; placed: $(grep -c '^placed' "$OUT/tasks.inside"); reported by cpushield: $(grep -c '^reported ' "$OUT/tasks.inside"), kthreads reported by kind: $(grep -c '^reported-kind' "$OUT/tasks.inside")"
    check "every task is off $sh except per-CPU kthreads, placed and reported tasks ($bad_tasks left)" [ "$bad_tasks" -eq 0 ]
    # -- IRQs
    local irq_bad=0 unnamed=0 lagging=""
    for n in $(irq_list); do
        a=$(cat /proc/irq/$n/smp_affinity_list); name=$(irq_name "$n")
        case "$refusing" in
            *" $n "*)
                # a refusing IRQ that stays on the shield must be named; one
                # already on housekeeping CPUs needs no write, so no refusal
                if cpus_overlap "$a" "$sh" && ! grep -w "$n" "$outf" | grep -qF "$name"; then
                    unnamed=$((unnamed + 1)); info "refusing IRQ $n ($name, on $a) not named in cpushield's output"
                fi
                continue ;;
        esac
        case "$irqs_in" in
            *" $n "*) cpus_subset "$a" "$sh" || { irq_bad=$((irq_bad + 1)); info "IRQ $n ($name) asked into the shield but on $a"; }
                      continue ;;
        esac
        if cpus_overlap "$a" "$sh"; then irq_bad=$((irq_bad + 1)); info "IRQ $n ($name) still on $a"; fi
        e=$(cat /proc/irq/$n/effective_affinity_list 2>/dev/null || true)
        [ -n "$e" ] && cpus_overlap "$e" "$sh" && lagging="$lagging $n($name:$e)"
    done
    check "every IRQ that accepts an affinity is off $sh ($irq_bad not)" [ "$irq_bad" -eq 0 ]
    check "every refusing IRQ left on $sh is named (number and name) in cpushield's output ($unnamed not)" [ "$unnamed" -eq 0 ]
    [ -n "$lagging" ] && snote "IRQ affinity accepted but effective_affinity_list still on the shield right after 'on':$lagging"
    a=$(mask_to_list "$(cat /proc/irq/default_smp_affinity)")
    if cpus_overlap "$a" "$sh"; then bad "default_smp_affinity ($a) is off $sh"; else ok "default_smp_affinity ($a) is off $sh"; fi
    if [ -f /sys/devices/virtual/workqueue/cpumask ]; then
        a=$(mask_to_list "$(cat /sys/devices/virtual/workqueue/cpumask)")
        if cpus_overlap "$a" "$sh"; then bad "workqueue cpumask ($a) is off $sh"; else ok "workqueue cpumask ($a) is off $sh"; fi
    fi
    # -- the kernel-enforced partition
    case $(cgroup_mode) in
        v2)
            v2_partitions | sed 's/^/  partition: /'
            local p
            p=$(v2_partitions | awk -v sh="$sh" "$AWK_CPULIB"' subset($2, sh) && subset(sh, $2) { print }' | head -n1)
            case "$p" in
                *" isolated") ok "partition ${p%% *} reads back 'isolated' with effective CPUs $sh" ;;
                "") bad "a cgroup v2 partition holds exactly $sh" ;;
                *) bad "partition reads back valid: '$p'" ;;
            esac
            a=$(cat /sys/fs/cgroup/cpuset.cpus.effective)
            if cpus_overlap "$a" "$sh"; then bad "root cpuset.cpus.effective ($a) excludes $sh"; else ok "root cpuset.cpus.effective ($a) excludes $sh"; fi
            [ -f /sys/fs/cgroup/cpuset.cpus.isolated ] && snote "root cpuset.cpus.isolated with an isolated partition on $sh reads '$(cat /sys/fs/cgroup/cpuset.cpus.isolated)'"
            ;;
        v1)
            local r=/sys/fs/cgroup/cpuset d rt="" nrt=""
            for d in $(find $r -mindepth 1 -type d); do
                a=$(cat "$d/cpuset.cpus")
                info "cpuset ${d#$r}: cpus=$a mems=$(cat $d/cpuset.mems) cpu_exclusive=$(cat $d/cpuset.cpu_exclusive) sched_load_balance=$(cat $d/cpuset.sched_load_balance) tasks=$(wc -l <$d/tasks)"
                [ -n "$a" ] && cpus_equal "$a" "$sh" && rt=$d
                [ -n "$a" ] && cpus_equal "$a" "$hk" && nrt=$d
            done
            check "v1: an rt cpuset holds exactly $sh" [ -n "$rt" ]
            check "v1: an nrt cpuset holds exactly $hk" [ -n "$nrt" ]
            if [ -n "$rt" ]; then
                check "v1: rt is cpu_exclusive" [ "$(cat $rt/cpuset.cpu_exclusive)" = 1 ]
                check "v1: rt has load balancing off" [ "$(cat $rt/cpuset.sched_load_balance)" = 0 ]
                check "v1: rt has mems" [ -n "$(cat $rt/cpuset.mems)" ]
            fi
            if [ -n "$nrt" ]; then
                check "v1: nrt has load balancing on" [ "$(cat $nrt/cpuset.sched_load_balance)" = 1 ]
                check "v1: nrt has mems" [ -n "$(cat $nrt/cpuset.mems)" ]
            fi
            check "v1: root has load balancing off" [ "$(cat $r/cpuset.sched_load_balance)" = 0 ]
            ;;
        *) bad "no cpuset hierarchy mounted after 'on'" ;;
    esac
}

# children_check SHIELD: a shell loop forking continuously before, during
# and after 'on'; children forked after 'on' returned must be off SHIELD,
# also when they ask for it with sched_setaffinity (taskset).
# Runs 'on SHIELD' itself (ON_ARGS extra arguments).
children_check() {
    local sh=$1 hk loop n_after bad_after n_during on_during
    hk=$(cpus_minus "$(all_cpus)" "$sh")
    rm -f /tmp/on.done "$OUT/forks"
    ( while :; do
          [ -e /tmp/stop.forks ] && exit 0
          if [ -e /tmp/on.done ]; then t=after; else t=during; fi
          awk -v t=$t '/^Cpus_allowed_list:/ { print t, $2 }' /proc/self/status >>"$OUT/forks"
      done ) &
    loop=$!
    sleep 1
    cs on "$sh"; check "on $sh exits 0 (with a forking loop running)" [ "$CS_RC" -eq 0 ]
    touch /tmp/on.done
    sleep 2
    # asking for the shield with sched_setaffinity, from outside it
    local got rc
    got=$(taskset -c "$sh" awk '/^Cpus_allowed_list:/ { print $2 }' /proc/self/status 2>"$OUT/ts.err"); rc=$?
    snote "taskset -c $sh CMD (all shield CPUs) outside the shield: exit $rc, child cpus '${got}' $(head -c 120 "$OUT/ts.err" | tr '\n' ' ')"
    if [ -n "$got" ] && cpus_overlap "$got" "$sh"; then bad "taskset -c $sh from outside gets no shielded CPU (got $got)"; else ok "taskset -c $sh from outside gets no shielded CPU (exit $rc, '${got}')"; fi
    got=$(taskset -c "0-$((NCPUS - 1))" awk '/^Cpus_allowed_list:/ { print $2 }' /proc/self/status 2>"$OUT/ts.err"); rc=$?
    snote "taskset -c 0-$((NCPUS - 1)) CMD outside the shield: exit $rc, child cpus '${got}'"
    if [ -n "$got" ] && cpus_overlap "$got" "$sh"; then bad "taskset -c all-CPUs from outside gets no shielded CPU (got $got)"; else ok "taskset -c all-CPUs from outside gets no shielded CPU (exit $rc, '${got}')"; fi
    sleep 1000 & local sl=$!
    taskset -p -c "$sh" $sl >"$OUT/ts.out" 2>&1; rc=$?
    got=$(awk '/^Cpus_allowed_list:/ { print $2 }' /proc/$sl/status)
    snote "taskset -p -c $sh on a running task outside the shield: exit $rc, its cpus now '$got' ($(tail -n1 "$OUT/ts.out" | head -c 100))"
    if cpus_overlap "$got" "$sh"; then bad "taskset -p on a running outside task cannot put it on the shield (got $got)"; else ok "taskset -p on a running outside task cannot put it on the shield (exit $rc, $got)"; fi
    kill $sl 2>/dev/null; wait $sl 2>/dev/null
    touch /tmp/stop.forks; wait $loop 2>/dev/null; rm -f /tmp/stop.forks
    n_after=$(grep -c '^after' "$OUT/forks"); n_during=$(grep -c '^during' "$OUT/forks")
    bad_after=$(awk -v sh="$sh" "$AWK_CPULIB"' $1 == "after" && overlap($2, sh)' "$OUT/forks" | wc -l)
    on_during=$(awk -v sh="$sh" "$AWK_CPULIB"' $1 == "during" && overlap($2, sh)' "$OUT/forks" | wc -l)
    info "children: $n_during forked before 'on' returned ($on_during had shield CPUs), $n_after after"
    check "children forked after 'on' ($n_after) never get a shielded CPU ($bad_after did)" [ "$n_after" -gt 0 -a "$bad_after" -eq 0 ]
}

# custom_state: tasks and IRQs with affinities of their own, and a user
# cgroup, so that undo has something to give back.  Sets CUSTOM_PIDS.
custom_state() {
    taskset -c 3 sleep 100000 & CUSTOM_PIDS="$!"
    taskset -c 1-2 sleep 100000 & CUSTOM_PIDS="$CUSTOM_PIDS $!"
    cyclictest -q -t2 -a 1,2 -i 20000 -D 100000 >/dev/null 2>&1 & CUSTOM_PIDS="$CUSTOM_PIDS $!"
    sleep 100000 & CUSTOM_PIDS="$CUSTOM_PIDS $!"
    if [ "$(cgroup_mode)" = v2 ]; then
        mkdir -p /sys/fs/cgroup/app && echo $! >/sys/fs/cgroup/app/cgroup.procs
    fi
    local n
    CUSTOM_IRQS=""
    n=$(irq_by_name 'virtio1-input'); [ -n "$n" ] && CUSTOM_IRQS="$n:$(cat /proc/irq/$n/smp_affinity_list)" && echo 3 >/proc/irq/$n/smp_affinity_list 2>/dev/null
    n=$(irq_by_name 'i8042'); [ -n "$n" ] && CUSTOM_IRQS="$CUSTOM_IRQS $n:$(cat /proc/irq/$n/smp_affinity_list)" && echo 1 >/proc/irq/$n/smp_affinity_list 2>/dev/null
    sleep 1
    info "custom state: $(for p in $CUSTOM_PIDS; do printf '%s:%s ' $p "$(awk '/^Cpus_allowed_list/ { print $2 }' /proc/$p/status)"; done)"
}
custom_state_end() {
    local p i
    for p in $CUSTOM_PIDS; do kill "$p" 2>/dev/null; done
    wait 2>/dev/null
    rmdir /sys/fs/cgroup/app 2>/dev/null
    for i in $CUSTOM_IRQS; do echo "${i#*:}" >/proc/irq/${i%%:*}/smp_affinity_list 2>/dev/null; done
    true
}

# ---- what reaches a CPU, by the kernel's own counters -----------------------
# noise_on_cpu CPU SECONDS RUNNER...: runs a busy loop on CPU through RUNNER
# (e.g. "cpushield run --cpu 3 --" or "taskset -c 3"), under a stress-ng load
# the caller started, and sets per-second rates over SECONDS from
# /proc/interrupts (LOC: the tick; RES/CAL/TLB/IWI/PMI: IPIs; numbered lines:
# device IRQs), /proc/softirqs and the loop's involuntary context switches:
# N_TICK N_IPI N_DEV N_SOFT N_PREEMPT (two decimals), and NOISE_LINE.
noise_on_cpu() {
    local cpu=$1 secs=$2 loop col
    shift 2
    "$@" sh -c 'while :; do :; done' &
    loop=$!
    sleep 2
    col=$((cpu + 2))
    _noise_counts() {
        _loc=$(awk -v c=$col '$1 == "LOC:" { print $c }' /proc/interrupts)
        _ipi=$(awk -v c=$col '$1 ~ /^(RES|CAL|TLB|IWI|PMI):$/ { s += $c } END { print s + 0 }' /proc/interrupts)
        _dev=$(awk -v c=$col '$1 ~ /^[0-9]+:$/ { s += $c } END { print s + 0 }' /proc/interrupts)
        _soft=$(awk -v c=$col 'NR > 1 { s += $c } END { print s + 0 }' /proc/softirqs)
        _inv=$(awk '/^nonvoluntary_ctxt_switches/ { print $2 }' /proc/$loop/status)
    }
    _noise_lines() { # NAME COUNT for every line of both files, CPU's column
        awk -v c=$col '$1 ~ /:$/ && NF >= c { print $1, $c }' /proc/interrupts
        awk -v c=$col 'NR > 1 { print "softirq-" $1, $c }' /proc/softirqs
    }
    _noise_counts; _noise_lines >/tmp/noise.before
    local l0=$_loc i0=$_ipi d0=$_dev s0=$_soft v0=$_inv
    sleep "$secs"
    _noise_counts; _noise_lines >/tmp/noise.after
    kill $loop; wait $loop 2>/dev/null
    _rate() { awk -v a="$1" -v b="$2" -v s="$secs" 'BEGIN { printf "%.2f", (b - a) / s }'; }
    N_TICK=$(_rate $l0 $_loc); N_IPI=$(_rate $i0 $_ipi); N_DEV=$(_rate $d0 $_dev)
    N_SOFT=$(_rate $s0 $_soft); N_PREEMPT=$(_rate $v0 $_inv)
    # which lines grew, e.g. "LOC:12 RES:20 softirq-RCU:3"
    N_WHAT=$(awk 'NR == FNR { a[$1] = $2; next } $2 - a[$1] > 0 { printf "%s%d ", $1, $2 - a[$1] }' /tmp/noise.before /tmp/noise.after)
    NOISE_LINE="tick $N_TICK, IPIs $N_IPI, device IRQs $N_DEV, softirqs $N_SOFT, preempted $N_PREEMPT (per second, CPU $cpu, $secs s; counts: ${N_WHAT:-none})"
}
# le A B: A <= B for decimals
le() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a <= b) }'; }

# ---- JSON (the guest has no jq) ---------------------------------------------
# json_flat [FILE]: one "PATH<TAB>VALUE" line per scalar of a JSON document,
# in document order, e.g.
#   .results[0].explain.causes[1].cause<TAB>task cs-spinner
#   .results[0].explain.causes[1].main_in<TAB>12
# Strings lose their quotes (\" and \\ are unescaped, other escapes kept);
# empty objects and arrays print nothing. Pretty or compact JSON, as long
# as no string spans lines (JSON escapes newlines). A pretty document's
# lines of one scalar take a fast path: busybox awk under TCG took over
# 190 s for compare's 3.4 MB results.json character by character.
json_flat() {
    awk '
    function path(   i, p) {
        p = ""
        for (i = 1; i <= d; i++) p = p (typ[i] == "o" ? "." key[i] : "[" idx[i] "]")
        return p
    }
    function value(v) {
        if (d > 0 && typ[d] == "o" && want_key) { key[d] = v; return }
        print path() "\t" v
    }
    BEGIN { d = 0; want_key = 0 }
    {
        line = $0; sub(/^[ \t]+/, "", line)
        # Fast path for pretty JSON: a line that is one scalar, with its
        # key in an object ("key": 1,) or alone in an array ("a",).
        if (line ~ /^("[^"\\]*": )?("[^"\\]*"|[-+.0-9a-zE]+),?$/) {
            if (substr(line, 1, 1) == "\"" && match(line, /^"[^"\\]*": /)) {
                key[d] = substr(line, 2, RLENGTH - 4); line = substr(line, RLENGTH + 1)
            }
            comma = sub(/,$/, "", line)
            if (substr(line, 1, 1) == "\"") line = substr(line, 2, length(line) - 2)
            print path() "\t" line
            if (comma) { if (typ[d] == "a") idx[d]++; else want_key = 1 }
            next
        }
        n = length(line); i = 1
        while (i <= n) {
            c = substr(line, i, 1)
            if (c == " " || c == "\t") { i++; continue }
            if (c == "\"") {
                rest = substr(line, i + 1)
                j = index(rest, "\"")
                b = index(rest, "\\")
                if (j > 0 && (b == 0 || b > j)) {
                    # no escape before the closing quote: the string at once
                    value(substr(rest, 1, j - 1)); i += j + 1; continue
                }
                s = ""; i++
                while (i <= n) {
                    c = substr(line, i, 1)
                    if (c == "\\") {
                        e = substr(line, i + 1, 1)
                        s = s ((e == "\"" || e == "\\") ? e : c e); i += 2; continue
                    }
                    if (c == "\"") break
                    s = s c; i++
                }
                i++; value(s); continue
            }
            if (c == "{") { d++; typ[d] = "o"; key[d] = ""; want_key = 1 }
            else if (c == "[") { d++; typ[d] = "a"; idx[d] = 0; want_key = 0 }
            else if (c == "}" || c == "]") { d--; want_key = 0 }
            else if (c == ",") { if (typ[d] == "a") idx[d]++; else want_key = 1 }
            else if (c == ":") want_key = 0
            else if (c ~ /[-0-9a-z]/) {
                match(substr(line, i), /^[-+.0-9a-zE]+/)
                value(substr(line, i, RLENGTH)); i += RLENGTH; continue
            }
            i++
        }
    }' "$@"
}
# json_get FILE PATH: the value at PATH (as json_flat prints it), empty if none
json_get() { json_flat "$1" | awk -F '\t' -v p="$2" '$1 == p { print $2; found = 1; exit }'; }
# json_part FILE COMPONENT PATH: the value at PATH in the data of the
# report's part COMPONENT (`.parts[i].data` where `.parts[i].component`
# is COMPONENT), empty if none
json_part() {
    json_flat "$1" | awk -F '\t' -v c="$2" -v p="$3" '
        $1 ~ /^\.parts\[[0-9]+\]\.component$/ && $2 == c { want = substr($1, 1, length($1) - 10) ".data" p }
        want != "" && $1 == want { print $2; exit }'
}
# heal_counted REASON: waits up to 5 s for the healer's state file to count
# a repair for REASON, 0 when it does. The healer writes its count after
# the repair has let go of the lock, so a status that holds can come first.
heal_counted() {
    i=0
    while [ $i -lt 50 ]; do
        grep -Eq "\"$1\": *[1-9]" /run/cpushield/heal.json && return 0
        sleep 0.1; i=$((i + 1))
    done
    return 1
}
