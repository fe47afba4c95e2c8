#!/bin/sh
# compare.sh BEFORE AFTER: exit 0 when equal.  Tasks are compared when
# present in both (same tid and start time); tasks that appeared or exited
# are listed as information only.  A task whose CPUs one snapshot did not
# compare (cpus=~: an irq thread, or PF_NO_SETAFFINITY, which the kernel
# sets and clears on its own threads, e.g. a per-CPU kworker unbound as it
# exits) has only its cgroup compared.  Everything else must match exactly.
awk '
FNR == 1 { fi++ }
{
    if ($1 == "task") { key = "task " $2 " " $3; val = $4 " " $5; info = $0; sub(/.* # /, "", info) }
    else if ($1 == "irq") { key = "irq " $2; val = $3 }
    else if ($1 == "file") { key = "file " $2; val = $0; sub(/^file [^ ]+ ?/, "", val) }
    else { key = $0; val = "" }
    if (fi == 1) { a[key] = val; ai[key] = info } else { b[key] = val; bi[key] = info }
    info = ""
}
END {
    bad = 0
    for (k in a) {
        if (!(k in b)) {
            if (k ~ /^task /) { gone++; continue }
            print "only before: " k " = " a[k]; bad = 1
        } else if (k ~ /^task / && (a[k] ~ /^cpus=~ / || b[k] ~ /^cpus=~ /)) {
            x = a[k]; y = b[k]; sub(/^cpus=[^ ]* /, "", x); sub(/^cpus=[^ ]* /, "", y)
            if (x != y) { print "changed:     " k " (" ai[k] "): " a[k] " -> " b[k]; bad = 1 }
        } else if (a[k] != b[k]) {
            print "changed:     " k " (" ai[k] "): " a[k] " -> " b[k]; bad = 1
        }
    }
    for (k in b) if (!(k in a)) {
        if (k ~ /^task /) { born++; continue }
        print "only after:  " k " = " b[k]; bad = 1
    }
    printf "(tasks compared in both; %d exited, %d started in between)\n", gone, born
    exit bad
}' "$1" "$2"
