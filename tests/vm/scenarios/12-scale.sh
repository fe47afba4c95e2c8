#!/bin/sh
# summary: on + off with 10,000 more threads (100 processes x 100): every one leaves the shield and gets its CPUs back; notes the times
# vm: cpus=4 kernels=6.12
. /guest/lib.sh "$1"
SH=2-3
HK=$(cpus_minus "$(all_cpus)" $SH)
PROCS=100
THREADS=100
has_cpushield || { bad "cpushield binary in the guest"; result; }
command -v idle_tasks >/dev/null 2>&1 || skip "no idle_tasks in the guest (cargo build -p cpushield-tools --bin idle_tasks)"

now() { cut -d' ' -f1 /proc/uptime; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }
# lap STEP: how long the scenario's step took (where its minutes go under TCG)
LAP=$(now)
lap() { local t; t=$(now); info "step: $1 took $(secs "$LAP" "$t") s"; LAP=$t; }
nthreads() { ls -d /proc/[0-9]*/task/[0-9]* 2>/dev/null | wc -l; }
# affinity_counts PIDS...: "COUNT CPULIST" per distinct affinity of their
# threads, by sched_getaffinity (reading 10,000 status files takes 15 s here)
affinity_counts() { idle_tasks --affinities "$@"; }

# the same on + off with only the guest's own tasks, for comparison
base=$(nthreads)
t0=$(now); cs on $SH >/dev/null; rc_on=$CS_RC; t1=$(now); cs off >/dev/null; rc_off=$CS_RC; t2=$(now)
check "baseline: on and off exit 0 with $base threads" [ "$rc_on" -eq 0 -a "$rc_off" -eq 0 ]
base_on=$(secs "$t0" "$t1"); base_off=$(secs "$t1" "$t2")
lap "baseline on + off"

old_max=$(cat /proc/sys/kernel/threads-max)
want=$((PROCS * THREADS + base + 1000))
[ "$old_max" -lt "$want" ] && echo "$want" >/proc/sys/kernel/threads-max
mkfifo "$OUT/hold"
idle_tasks $PROCS $THREADS <"$OUT/hold" >"$OUT/ready" 2>&1 &
IDLE=$!
exec 7>"$OUT/hold"      # idle_tasks holds its tasks while this stays open
i=0
while ! grep -q '^ready' "$OUT/ready" && [ $i -lt 300 ] && kill -0 $IDLE 2>/dev/null; do
    sleep 1; i=$((i + 1))
done
PIDS=$(sed -n 's/^ready //p' "$OUT/ready")
lap "starting idle_tasks"
total=$(nthreads)
lap "counting threads"
info "idle_tasks started $PROCS x $THREADS threads in ${i}s; $total threads in all"
check "$((PROCS * THREADS)) idle threads exist" [ "$(affinity_counts $PIDS | awk '{ s += $1 } END { print s + 0 }')" -eq $((PROCS * THREADS)) ]
lap "reading every idle thread's affinity"

t0=$(now); CS_SHOW=20 cs on $SH; rc=$CS_RC; t1=$(now)
check "on $SH exits 0 with $total threads" [ "$rc" -eq 0 ]
counts=$(affinity_counts $PIDS)
info "idle threads by Cpus_allowed_list after on: $(echo $counts)"
# one_list COUNTS CPUS: every idle thread has the same list, equal to CPUS
one_list() { [ "$(echo "$1" | wc -l)" -eq 1 ] && [ "${1%% *}" -eq $((PROCS * THREADS)) ] && cpus_equal "${1#* }" "$2"; }
check "every idle thread is on the housekeeping CPUs $HK after on" one_list "$counts" "$HK"
t2=$(now); CS_SHOW=20 cs off; rc=$CS_RC; t3=$(now)
check "off exits 0" [ "$rc" -eq 0 ]
counts=$(affinity_counts $PIDS)
check "every idle thread has all CPUs $(all_cpus) again after off" one_list "$counts" "$(all_cpus)"
lap "on, off and two affinity reads"
note "scale: $total threads: on $(secs "$t0" "$t1") s, off $(secs "$t2" "$t3") s; with $base threads: on $base_on s, off $base_off s (TCG, /proc/uptime resolution 10 ms)"
note "scale: cpushield's own account: on $(sed -n 's/^ *took *//p' "$OUT/cs.$((CS_N - 1)).out"); off $(sed -n 's/^ *took *//p' "$OUT/cs.$CS_N.out")"

exec 7>&-
wait $IDLE
lap "ending idle_tasks"
check "idle_tasks ended and took its processes with it" [ "$(nthreads)" -lt $((base + 100)) ]
echo "$old_max" >/proc/sys/kernel/threads-max
result
