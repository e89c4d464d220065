#!/usr/bin/env bash
# Session 20 (issue 31, key groups): interleaved A/B of two air binaries: ROUNDS rounds, each runs every case
# (ONLY=wa-shuffle,q5 picks cases)
# with base then new (order alternating per round); prints events/s.
set -u
ROUNDS=${ROUNDS:-5}
BASE=${BASE:-/tmp/ab/air-base}
NEW=${NEW:-/tmp/ab/air-new}
cases=(
  "wa-shuffle|run wa --events 100000000 --workers 2 --shuffle"
  "ysb-shuffle|run ysb --events 200000000 --workers 2 --shuffle"
  "q5|run nexmark --query q5 --events 60000000 --workers 2"
  "wa|run wa --events 600000000 --workers 2"
)
rate() { "$1" $2 --report /tmp/ab/r.json >/dev/null 2>&1 && python3 -c "import json;print(round(json.load(open('/tmp/ab/r.json'))['events_per_s']/1e6,2))" || echo ERR; }
for r in $(seq 1 "$ROUNDS"); do
  for c in "${cases[@]}"; do
    name=${c%%|*}; args=${c#*|}
    [[ -n "${ONLY:-}" && ",$ONLY," != *",$name,"* ]] && continue
    if (( r % 2 )); then a=$(rate "$BASE" "$args"); b=$(rate "$NEW" "$args"); else b=$(rate "$NEW" "$args"); a=$(rate "$BASE" "$args"); fi
    echo "round $r $name base $a new $b load $(cut -d' ' -f1 /proc/loadavg)"
  done
done
