#!/usr/bin/env bash
# Watermark alignment A/B (session 24): old = main before alignment, new =
# alignment on by default for NEXMark's windowed queries (drift = window).
# q8 and q5, with and without checkpoints every 1 s, 2 workers, interleaved
# round by round. Prints: round bin query mode M-events/s part-MB rss-MB.
# Usage: ab-alignment.sh OLD_AIR NEW_AIR ROUNDS
set -u
OLD=$1 NEW=$2 ROUNDS=${3:-5}
T=$(mktemp -d /tmp/ab-align.XXXX)
for r in $(seq 1 "$ROUNDS"); do
  for q in "q8 40000000" "q5 50000000"; do
    set -- $q
    for mode in out ck; do
      for bin in old new; do
        B=$OLD; [ $bin = new ] && B=$NEW
        rm -rf "$T/ck"
        X=""; [ $mode = ck ] && X="--checkpoint-ms 1000 --checkpoint-dir $T/ck"
        "$B" run nexmark --query "$1" --events "$2" --workers 2 --out "$T/out.csv" --report "$T/rep.json" $X >/dev/null 2>&1
        python3 - "$r" "$bin" "$1" "$mode" "$T/rep.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[5]))
st = (r.get("checkpoints") or {}).get("state") or {}
parts = st.get("parts_written") or 0
mb = (st.get("bytes", 0) / parts / 1e6) if parts else 0
print(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], round(r["events_per_s"] / 1e6, 2), round(mb, 2), round(r["peak_rss_bytes"] / 1e6))
PY
      done
    done
  done
done
rm -rf "$T"
