#!/usr/bin/env bash
# Builds (once, cached) a Debian system booted by systemd for the test bed:
# the distribution as users run it, with systemd, udev, dbus, irqbalance and
# tuned enabled as Debian ships them, plus rt-tests and stress-ng.
#   tests/vm/distro/image.sh SUITE [EXTRA]   (bookworm | trixie)
# EXTRA: more packages, comma-separated (the scale benchmark's tuna, cpuset
# and strace): a separate cached image, the test bed's own stays as it is.
# Prints the directory holding root.img (ext4, made with mke2fs -d: nothing
# is mounted on this machine), vmlinuz and initrd.img. Needs root (mmdebstrap
# in root mode) and Debian's package mirror; nothing on this machine changes
# beyond the cache directory.
set -euo pipefail
. "$(dirname "$0")/../lib/common.sh"
SUITE=${1:?usage: image.sh bookworm|trixie}
case $SUITE in bookworm|trixie) ;; *) die "suite '$SUITE': bookworm or trixie" ;; esac
need_cmd mmdebstrap mke2fs
PKGS=systemd-sysv,udev,dbus,kmod,procps,util-linux,iproute2,irqbalance,tuned,rt-tests,stress-ng,python3,initramfs-tools,linux-image-cloud-amd64,man-db
EXTRA=${2:-}
[ -n "$EXTRA" ] && PKGS=$PKGS,$EXTRA
# The unit that runs a job: the job disk (/dev/vdb) holds a tar with run.sh;
# its results go as a tar onto /dev/vdc; then the guest powers off.
read -r -d '' UNIT <<'UNIT_EOF' || true
[Unit]
Description=cpushield test-bed job
After=multi-user.target irqbalance.service tuned.service
Wants=multi-user.target

[Service]
Type=oneshot
ExecStart=/usr/local/sbin/cpushield-job
StandardOutput=journal+console
StandardError=journal+console
TimeoutStartSec=infinity

[Install]
WantedBy=multi-user.target
UNIT_EOF
read -r -d '' JOB <<'JOB_EOF' || true
#!/bin/sh
# Runs the test-bed job from /dev/vdb, results to /dev/vdc, then powers off.
mkdir -p /job /results
echo "CPUSHIELD-BOOT: at $(cut -d' ' -f1 /proc/uptime)s kernel $(uname -r) systemd $(systemctl --version | sed -n '1s/^systemd \([0-9]*\).*/\1/p') cgroup $(stat -fc %T /sys/fs/cgroup)"
if tar -xf /dev/vdb -C /job 2>/tmp/job.err; then
    sh /job/run.sh >/dev/console 2>&1
else
    echo "CPUSHIELD-WARN: no job on /dev/vdb: $(cat /tmp/job.err)"
fi
tar -cf /dev/vdc -C /results . 2>/dev/null
sync
echo "CPUSHIELD-DONE"
systemctl poweroff --no-block
JOB_EOF
HASH=$(printf '%s\n' "$PKGS" "$UNIT" "$JOB" 3 | sha256sum | cut -c1-12)
OUT=$CACHE_DIR/distro/$SUITE-$HASH
if [ -f "$OUT/.done" ]; then echo "$OUT"; exit 0; fi
rm -rf "$OUT"; mkdir -p "$OUT"
ROOTFS=$OUT/rootfs
log "building the $SUITE image (mmdebstrap, about a minute)"
printf '%s\n' "$UNIT" >"$OUT/cpushield-job.service"
printf '%s\n' "$JOB" >"$OUT/cpushield-job"
mmdebstrap --quiet --variant=minbase --include="$PKGS" \
    --customize-hook='echo cpushield-guest >"$1/etc/hostname"' \
    --customize-hook='echo "/dev/vda / ext4 rw,errors=remount-ro 0 1" >"$1/etc/fstab"' \
    --customize-hook='chroot "$1" passwd -d root' \
    --customize-hook="copy-in $OUT/cpushield-job.service /etc/systemd/system" \
    --customize-hook="copy-in $OUT/cpushield-job /usr/local/sbin" \
    --customize-hook='chmod 755 "$1/usr/local/sbin/cpushield-job"' \
    --customize-hook='chroot "$1" systemctl enable cpushield-job.service' \
    --customize-hook='chroot "$1" systemctl mask serial-getty@ttyS0.service getty@tty1.service systemd-timesyncd.service apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer fstrim.timer 2>/dev/null || true' \
    "$SUITE" "$ROOTFS" >"$OUT/mmdebstrap.log" 2>&1 || { tail -20 "$OUT/mmdebstrap.log" >&2; die "mmdebstrap $SUITE failed (log: $OUT/mmdebstrap.log)"; }
cp "$(ls "$ROOTFS"/boot/vmlinuz-* | head -n1)" "$OUT/vmlinuz"
cp "$(ls "$ROOTFS"/boot/initrd.img-* | head -n1)" "$OUT/initrd.img"
basename "$(ls "$ROOTFS"/boot/vmlinuz-* | head -n1)" | sed 's/^vmlinuz-//' >"$OUT/release"
mke2fs -q -t ext4 -d "$ROOTFS" "$OUT/root.img" 3G >"$OUT/mke2fs.log" 2>&1 || die "mke2fs failed (log: $OUT/mke2fs.log)"
rm -rf "$ROOTFS"
touch "$OUT/.done"
echo "$OUT"
