#!/usr/bin/env bash
# Session 24: time (ms) of a finite WA job, BIN NP EVENTS [air options]; NP 0 runs embedded.
# fin.sh BIN NP EVENTS extra...
BIN=$1; NP=$2; EV=$3; shift 3
D=$(mktemp -d /tmp/f.XXXX)
t0=$(date +%s%N)
if [ "$NP" = 0 ]; then
$BIN run wa --events $EV --keys 10 --window-ms 100 --events-per-s 100000 --seed 9 --no-pin --out $D/out.csv --report $D/rep.json "$@" >/dev/null 2>$D/err
else
mpirun -np $NP $BIN run wa --events $EV --keys 10 --window-ms 100 --events-per-s 100000 --seed 9 --no-pin --out $D/out.csv --report $D/rep.json "$@" >/dev/null 2>$D/err
fi
t1=$(date +%s%N)
echo "$(basename $BIN) wall_ms=$(( (t1-t0)/1000000 )) $(md5sum < $D/out.csv | cut -c1-8)"
rm -rf $D
