#!/usr/bin/env bash
# Session 19 (issue 30): interleaved A/B of two air binaries: ROUNDS rounds, each runs every case
# (ONLY=q5,wa picks cases; ab2.log is ONLY=q5,wa ROUNDS=10)
# with base then new (order alternating per round); prints events/s.
set -u
ROUNDS=${ROUNDS:-5}
BASE=${BASE:-/tmp/ab/air-base}
NEW=${NEW:-/tmp/ab/air-new}
cases=(
  "ysb|run ysb --events 400000000 --workers 2"
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
