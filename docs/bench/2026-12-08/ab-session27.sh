#!/usr/bin/env bash
# Session 27 A/B: old = main before the session (bdcb6bf-era hot-keys build), new = key groups movable (an Assignment lookup per record on keyed edges), consecutive barrier ids, load per period.
# hot key groups split at their senders (--rebalance, default on) and the
# per-edge load report. Uniform keys: WA --shuffle (100,000 keys) and YSB
# --shuffle (every-event aggregation: the changed path, new run with
# --rebalance on and off), YSB pre-aggregated, NEXMark q5. 2 workers,
# interleaved round by round (the order of binaries alternates). Prints:
# round bin job M-events/s.
# Usage: ab-session26.sh OLD_AIR NEW_AIR ROUNDS
set -u
OLD=$1 NEW=$2 ROUNDS=${3:-5}
T=$(mktemp -d /tmp/ab-s27.XXXX)
for r in $(seq 1 "$ROUNDS"); do
  for job in "wa-shuffle|wa --keys 100000 --events 60000000 --shuffle" \
             "ysb-shuffle|ysb --events 150000000 --event-time synthetic --shuffle" \
             "ysb|ysb --events 300000000 --event-time synthetic" \
             "q5|nexmark --query q5 --events 50000000"; do
    name=${job%%|*}; args=${job#*|}
    bins="old new-on new-off"
    [ $((r % 2)) = 0 ] && bins="new-off new-on old"
    for bin in $bins; do
      case $bin in
        old) cmd=("$OLD" run $args) ;;
        new-on) cmd=("$NEW" run $args --rebalance on) ;;
        new-off) cmd=("$NEW" run $args --rebalance off) ;;
      esac
      [ $name = q5 ] && [ $bin = new-off ] && continue
      [ $name = ysb ] && [ $bin = new-off ] && continue
      "${cmd[@]}" --workers 2 --report "$T/rep.json" >/dev/null 2>&1
      python3 - "$r" "$bin" "$name" "$T/rep.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[4]))
print(sys.argv[1], sys.argv[2], sys.argv[3], round(r["events_per_s"] / 1e6, 2))
PY
    done
  done
done
rm -rf "$T"
