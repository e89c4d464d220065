#!/usr/bin/env bash
# Session 20 (issue 31, barriers in-band): interleaved A/B of checkpoint barriers.
# Variants per case, order rotated per round: base (main before barriers, 8b96d71),
# none (this build, no barriers), 1s (--barrier-ms 1000), 10ms (--barrier-ms 10).
# ROUNDS rounds; ONLY=ysb,q8 picks cases; prints events/s (M) per variant.
set -u
ROUNDS=${ROUNDS:-5}
BASE=${BASE:-/tmp/ab/air-new}
NEW=${NEW:-/tmp/ab/air-bar}
cases=(
  "ysb|run ysb --events 400000000 --workers 2"
  "q5|run nexmark --query q5 --events 60000000 --workers 2"
  "q8|run nexmark --query q8 --events 60000000 --workers 2"
)
rate() { "$1" $2 --report /tmp/ab/r.json >/dev/null 2>&1 && python3 -c "import json;print(round(json.load(open('/tmp/ab/r.json'))['events_per_s']/1e6,2))" || echo ERR; }
variants=(base none 1s 10ms)
run_variant() {
  case $1 in
    base) rate "$BASE" "$2" ;;
    none) rate "$NEW" "$2" ;;
    1s) rate "$NEW" "$2 --barrier-ms 1000" ;;
    10ms) rate "$NEW" "$2 --barrier-ms 10" ;;
  esac
}
for r in $(seq 1 "$ROUNDS"); do
  for c in "${cases[@]}"; do
    name=${c%%|*}; args=${c#*|}
    [[ -n "${ONLY:-}" && ",$ONLY," != *",$name,"* ]] && continue
    line="round $r $name"
    for k in 0 1 2 3; do
      v=${variants[$(( (k + r) % 4 ))]}
      line="$line $v $(run_variant "$v" "$args")"
    done
    echo "$line load $(cut -d' ' -f1 /proc/loadavg)"
  done
done
