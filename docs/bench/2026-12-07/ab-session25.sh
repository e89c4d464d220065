#!/usr/bin/env bash
# Hot paths A/B (session 25): old = main before the session (8ea66fc), new =
# paced and followed-file checkpoints (a thread-local handshake around every
# source poll), input files rescale, q10 checkpoints. YSB pre-aggregated and
# --shuffle, NEXMark q0, q5, q8; 2 workers, no checkpoints, interleaved round
# by round. Prints: round bin query M-events/s.
# Usage: ab-session25.sh OLD_AIR NEW_AIR ROUNDS
set -u
OLD=$1 NEW=$2 ROUNDS=${3:-5}
T=$(mktemp -d /tmp/ab-s25.XXXX)
for r in $(seq 1 "$ROUNDS"); do
  for job in "ysb|ysb --events 300000000 --event-time synthetic" \
             "ysb-shuffle|ysb --events 150000000 --event-time synthetic --shuffle" \
             "q0|nexmark --query q0 --events 40000000" \
             "q5|nexmark --query q5 --events 50000000" \
             "q8|nexmark --query q8 --events 40000000"; do
    name=${job%%|*}; args=${job#*|}
    for bin in old new; do
      B=$OLD; [ $bin = new ] && B=$NEW
      "$B" run $args --workers 2 --report "$T/rep.json" >/dev/null 2>&1
      python3 - "$r" "$bin" "$name" "$T/rep.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[4]))
print(sys.argv[1], sys.argv[2], sys.argv[3], round(r["events_per_s"] / 1e6, 2))
PY
    done
  done
done
rm -rf "$T"
