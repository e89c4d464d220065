#!/usr/bin/env bash
# Resume time against the disk's bandwidth: a WA job with a large state
# (1,000,000 keys, rows held by the exactly-once sink between checkpoints)
# is killed once its first checkpoint is complete, then rerun; the rerun's
# report gives the bytes read and the resume time. The disk's sequential
# write (fsync) and read (page cache dropped) bandwidth is measured with dd
# in the same directory. Usage: resume-time.sh AIR_BINARY DIR   (needs root
# to drop the page cache)
set -euo pipefail
AIR=${1:?air binary}; D=${2:?a directory on the disk to measure}
mkdir -p "$D"; rm -rf "$D/ck" "$D/out.csv" "$D/report.json"
dd if=/dev/zero of="$D/bw" bs=1M count=1024 conv=fsync 2>&1 | tail -1 | sed 's/^/write: /'
sync; echo 3 > /proc/sys/vm/drop_caches
dd if="$D/bw" of=/dev/null bs=1M 2>&1 | tail -1 | sed 's/^/read: /'
rm -f "$D/bw"
ARGS=(run wa --events 4000000000 --keys 1000000 --window-ms 1000 --workers 2
      --out "$D/out.csv" --checkpoint-dir "$D/ck" --checkpoint-ms 15000)
"$AIR" "${ARGS[@]}" > /dev/null 2>&1 &
PID=$!
until ls "$D"/ck/chk-*/MANIFEST.json > /dev/null 2>&1; do sleep 0.2; done
kill -9 "$PID"; wait "$PID" 2>/dev/null || true
du -sb "$D"/ck/chk-* | sed 's/^/checkpoint bytes: /'
sync; echo 3 > /proc/sys/vm/drop_caches
# The rerun: stopped (SIGTERM) 2 s after it resumed; its report holds the
# resume figures.
"$AIR" "${ARGS[@]}" --report "$D/report.json" > /dev/null 2> "$D/err.log" &
PID=$!
until grep -q "resuming" "$D/err.log" 2>/dev/null; do sleep 0.1; done
sleep 2; kill -TERM "$PID"; wait "$PID" || true
grep "resuming" "$D/err.log"
python3 -c "import json,sys; c=json.load(open('$D/report.json'))['checkpoints']['state']; print('restored_bytes', c['restored_bytes'], 'restore_us', c['restore_us'])"
rm -rf "$D/ck" "$D/out.csv"
