#!/bin/bash
# YSB, 2 workers, from `air gen ysb --out -` through a pipe and from
# `air gen ysb --out tcp://` into `air run ysb --listen` (loopback), for two
# binaries A and B (each binary both generates and runs), interleaved
# A B B A per round. The campaigns are derived from the seed on both sides
# (no --campaigns file: nothing to race on).
# Usage: A=/path/old B=/path/new PARSE=query-fields|full live-ab.sh ROUNDS EVENTS
set -u
A=${A:?old binary}; B=${B:?new binary}; R=${1:-3}; N=${2:-20000000}
P="--parse ${PARSE:-full}"
rate(){ grep -oE "= [0-9.]+ M events/s" | grep -oE "[0-9.]+"; }
pipe(){ $1 gen ysb --events $N --out - 2>/dev/null | $1 run ysb $P --workers 2 --input - 2>&1 | rate; }
tcp(){ PT=$((7700 + RANDOM % 200))
  ( $1 run ysb $P --workers 2 --listen 127.0.0.1:$PT 2>&1 | rate ) &
  sleep 0.3; $1 gen ysb --events $N --out tcp://127.0.0.1:$PT 2>/dev/null; wait; }
echo "# $(date -u +%FT%TZ) $(uptime | sed 's/.*load/load/') A=$A B=$B $P events=$N"
for r in $(seq $R); do
  for m in pipe tcp; do
    for x in A B B A; do eval bin=\$$x; echo "$m $x $($m $bin)"; done
  done
done
echo "# end $(uptime | sed 's/.*load/load/')"
