#!/bin/bash
# A/B: base vs new, MPICH forced network tier, with embedded; interleaved ABBA.
# usage: net-ab-s18.sh ROUNDS EVENTS A B (A, B: air binaries built with --features mpi)
R=${1:-3}; N=${2:-100000000}; A=$3; B=$4
run() { # label cmd...
  local label=$1; shift
  local out; out=$( { timeout 300 /usr/bin/time -f "CPU %U %S %e" "$@" ; } 2>&1 )
  local rate; rate=$(echo "$out" | grep -oE "= [0-9.]+ M events/s" | head -1 | grep -oE "[0-9.]+")
  local cpu; cpu=$(echo "$out" | grep -E "^CPU" | tail -1 | awk '{print $2+$3, "wall", $4}')
  echo "$label rate=$rate cpu=$cpu load=$(cut -d' ' -f1 /proc/loadavg)"
}
for r in $(seq $R); do
  for sh in "" "--shuffle"; do
    run "emb$sh" $A run ysb --workers 2 --events $N --no-pin $sh
    run "A$sh" mpirun.mpich -np 2 $A run ysb --workers 1 --events $N --no-pin --force-network $sh
    run "B$sh" mpirun.mpich -np 2 $B run ysb --workers 1 --events $N --no-pin --force-network $sh
    run "B$sh" mpirun.mpich -np 2 $B run ysb --workers 1 --events $N --no-pin --force-network $sh
    run "A$sh" mpirun.mpich -np 2 $A run ysb --workers 1 --events $N --no-pin --force-network $sh
    run "emb$sh" $A run ysb --workers 2 --events $N --no-pin $sh
  done
done
