#!/bin/sh
# summary: who enables memory and pids in user.slice's subtree_control on
#   Debian 14: a unit of the scenario's kind in user.slice, or on and off
. /job/lib.sh "$1"
show() { info "$1: user.slice subtree_control = '$(cat /sys/fs/cgroup/user.slice/cgroup.subtree_control)'"; }
show "at start"
systemd-run --quiet --slice=user.slice --uid=nobody --unit=cs-probe-user sleep 30
sleep 2
show "with a user.slice unit running"
systemctl stop cs-probe-user
sleep 1
show "after it stopped"
systemctl daemon-reload
show "after daemon-reload"
cs on 2-3
show "after on"
systemctl daemon-reload
show "after on, daemon-reload"
cs off
show "after off"
result
