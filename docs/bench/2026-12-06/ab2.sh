#!/usr/bin/env bash
set -u
ROUNDS=${ROUNDS:-10}
cases=(
  "q5|run nexmark --query q5 --events 60000000 --workers 2"
  "wa|run wa --events 600000000 --workers 2"
)
rate() { "$1" $2 --report /tmp/ab/r.json >/dev/null 2>&1 && python3 -c "import json;print(round(json.load(open('/tmp/ab/r.json'))['events_per_s']/1e6,2))" || echo ERR; }
for r in $(seq 1 "$ROUNDS"); do
  for c in "${cases[@]}"; do
    name=${c%%|*}; args=${c#*|}
    if (( r % 2 )); then a=$(rate /tmp/ab/air-base "$args"); b=$(rate /tmp/ab/air-new "$args"); else b=$(rate /tmp/ab/air-new "$args"); a=$(rate /tmp/ab/air-base "$args"); fi
    echo "round $r $name base $a new $b load $(cut -d' ' -f1 /proc/loadavg)"
  done
done
