#!/bin/sh
# summary: two named sets under systemd (on 1-3 --set app1=1 --set
#   app2=2-3): each a slice of its own whose tasks the kernel keeps on its
#   CPUs (a taskset onto the other set refused), run by --set and by --cpu,
#   changed in place, one taken away by off --set with its task moved out,
#   the other kept; off gives back everything as before
# distro: suites=bookworm,trixie,trixie-rt,forky default-suites=bookworm
. /job/lib.sh "$1"
irqbalance_settle
snap before
cs on 1-3 --set app1=1 --set app2=2-3
check "on 1-3 with two named sets exits 0" [ "$CS_RC" = 0 ]
CG=/sys/fs/cgroup/cpushield.slice
eff() { cat "$CG/cpushield-$1.slice/cpuset.cpus.effective" 2>/dev/null; }
check "app1's slice has CPU 1 (cpuset.cpus.effective '$(eff app1)')" [ "$(eff app1)" = 1 ]
check "app2's slice has CPUs 2-3 (cpuset.cpus.effective '$(eff app2)')" [ "$(eff app2)" = 2-3 ]
# A sleeper in each: by --set, and by --cpu (the set that holds it).
set_sleepers
cg_of() { sed -n 's/^0:://p' /proc/$1/cgroup; }
info "sleeper 1: pid $p1 on $(cpus_of $p1) in $(cg_of $p1); sleeper 2: pid $p2 on $(cpus_of $p2) in $(cg_of $p2)"
check "run --set app1: the kernel runs it on CPU 1, in app1's slice" sh -c "[ '$(cpus_of $p1)' = 1 ] && echo '$(cg_of $p1)' | grep -q '^/cpushield.slice/cpushield-app1.slice/'"
check "run --cpu 3: in app2's slice, on CPU 3" sh -c "[ '$(cpus_of $p2)' = 3 ] && echo '$(cg_of $p2)' | grep -q '^/cpushield.slice/cpushield-app2.slice/'"
check "the kernel refuses app1's task a CPU of app2 (taskset -p -c 2)" sh -c "! taskset -p -c 2 $p1 >/dev/null 2>&1 && [ \"\$(awk '/^Cpus_allowed_list/ {print \$2}' /proc/$p1/status)\" = 1 ]"
cs status
check "status exits 0 with two sets" [ "$CS_RC" = 0 ]
check "status reads both sets back" grep -q 'app1 CPUs 1 (1 task), app2 CPUs 2-3 (1 task)' "$OUT/cs.out"
# In place: app1 takes CPU 2 from app2; app2's task stays on CPU 3.
cs on 1-3 --set app1=1-2 --set app2=3
check "change in place of the sets exits 0" [ "$CS_RC" = 0 ]
check "app1 now 1-2, app2 3 (effective '$(eff app1)', '$(eff app2)')" [ "$(eff app1)-$(eff app2)" = 1-2-3 ]
check "app2's task stayed, on CPU 3" sh -c "[ '$(cpus_of $p2)' = 3 ] && kill -0 $p2"
# off --set app1: its CPUs leave the shield, its task goes with them.
cs off --set app1
check "off --set app1 exits 0" [ "$CS_RC" = 0 ]
check "app1's slice is gone" [ ! -d "$CG/cpushield-app1.slice" ]
check "the shield is CPU 3 (cpushield.slice effective '$(cat $CG/cpuset.cpus.effective)')" [ "$(cat $CG/cpuset.cpus.effective)" = 3 ]
c1=$(cpus_of $p1); g1=$(cg_of $p1); left=no
kill -0 $p1 && ! echo "$g1" | grep -q '^/cpushield.slice' && ! meets "$c1" 3 && left=yes
check "app1's task runs on, back where it came from, off the shield (CPUs $c1, $g1)" [ $left = yes ]
check "app2 and its task untouched" sh -c "[ '$(eff app2)' = 3 ] && [ '$(cpus_of $p2)' = 3 ] && kill -0 $p2"
cs status
check "status exits 0 with one set left" [ "$CS_RC" = 0 ]
kill $p1 $p2 2>/dev/null; wait 2>/dev/null
cs off
check "off exits 0" [ "$CS_RC" = 0 ]
irqbalance_settle
snap after
snap_equal_after_irqbalance before after "after off: everything as before the sets"
result
