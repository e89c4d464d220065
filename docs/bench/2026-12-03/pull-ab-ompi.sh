#!/bin/bash
# A/B under Open MPI: main (16aa542) vs pull, interleaved ABBA, with embedded.
# usage: ab-ompi.sh ROUNDS EVENTS
R=${1:-3}; N=${2:-50000000}
A=/tmp/pullx/air-base-ompi; B=/tmp/pullx/air-pull-ompi; E=/tmp/pullx/air-base
OMPI="mpirun.openmpi --oversubscribe --allow-run-as-root -np 2"
run() { # label cmd...
  local label=$1; shift
  local out; out=$( { timeout 300 /usr/bin/time -f "CPU %U %S %e" "$@" ; } 2>&1 )
  local rate; rate=$(echo "$out" | grep -oE "= [0-9.]+ M events/s" | head -1 | grep -oE "[0-9.]+")
  local cpu; cpu=$(echo "$out" | grep -E "^CPU" | tail -1 | awk '{print $2+$3, "wall", $4}')
  echo "$label rate=$rate cpu=$cpu load=$(cut -d' ' -f1 /proc/loadavg)"
}
for r in $(seq $R); do
  for sh in "" "--shuffle"; do
    run "emb$sh" $E run ysb --workers 2 --events $N --no-pin $sh
    run "ompibase$sh" $OMPI $A run ysb --workers 1 --events $N --no-pin --force-network $sh
    run "ompipull$sh" $OMPI $B run ysb --workers 1 --events $N --no-pin --force-network $sh
    run "ompipull$sh" $OMPI $B run ysb --workers 1 --events $N --no-pin --force-network $sh
    run "ompibase$sh" $OMPI $A run ysb --workers 1 --events $N --no-pin --force-network $sh
    run "emb$sh" $E run ysb --workers 2 --events $N --no-pin $sh
  done
done
