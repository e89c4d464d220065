#!/usr/bin/env bash
# Session 24: mpirun -np 8 BIN run wa (unpaced, 8 x 28 workers, 64 KiB rings, --force-network) for WAIT s (default 9), then SIGTERM; prints the stop time (s) and events/s.
# usage: run.sh BIN  -> prints stop time
BIN=$1; shift
D=$(mktemp -d /tmp/r.XXXX)
setsid mpirun -np 8 $BIN run wa --events 100000000000 --keys 10 --window-ms 100 --events-per-s 100000 --seed 9 --workers 28 --ring-bytes 65536 --no-pin --out $D/out.csv --report $D/rep.json --force-network "$@" >$D/stdout 2>$D/stderr &
P=$!
sleep ${WAIT:-9}
t0=$(date +%s.%N)
kill -TERM $P
wait $P; rc=$?
t1=$(date +%s.%N)
echo "$BIN rc=$rc stop=$(echo "$t1 - $t0" | bc)"
python3 -c "import json;r=json.load(open(\"$D/rep.json\"));print(\"eps\",int(r[\"events_per_s\"]))"
rm -rf $D
