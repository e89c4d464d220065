#!/bin/bash
# YSB from a file, a pipe (cat and air gen) and TCP loopback, 2 workers,
# interleaved. Usage: live-input.sh ROUNDS EVENTS (binary: $AIR, default
# /tmp/lv/air; PARSE=query-fields for `--parse query-fields`).
set -u
AIR=${AIR:-/tmp/lv/air}; R=${1:-3}; N=${2:-20000000}; D=/tmp/lv
[ -f $D/x.json ] || $AIR gen ysb --events $N --out $D/x.json --campaigns-out $D/c.json 2>/dev/null
P="--parse ${PARSE:-full}"
rate(){ grep -oE "= [0-9.]+ M events/s" | grep -oE "[0-9.]+"; }
file(){ $AIR run ysb $P --workers 2 --input $D/x.json --campaigns $D/c.json 2>&1 | rate; }
cat_(){ cat $D/x.json | $AIR run ysb $P --workers 2 --input - --campaigns $D/c.json 2>&1 | rate; }
gen(){ $AIR gen ysb --events $N --out - --campaigns-out $D/g.json 2>/dev/null | $AIR run ysb $P --workers 2 --input - --campaigns $D/g.json 2>&1 | rate; }
tcp(){ PT=$((7700 + RANDOM % 200))
  ( $AIR run ysb $P --workers 2 --listen 127.0.0.1:$PT --campaigns $D/c.json 2>&1 | rate ) &
  sleep 0.5; python3 -c "import socket,sys; s=socket.create_connection(('127.0.0.1',$PT)); s.sendfile(open('$D/x.json','rb')); s.close()"; wait; }
echo "gen alone: $( { /usr/bin/time -f %e $AIR gen ysb --events $N --out - --campaigns-out $D/g.json > /dev/null; } 2>&1 | tail -1 ) s for $N events"
for r in $(seq $R); do
  for m in file cat_ gen tcp tcp gen cat_ file; do echo "$m $($m)"; done
done
