#!/bin/bash
# Steady-state CPU of a paced YSB (1,000 events/s) per process and the
# worker wake-ups per second, as tests/idle_cpu.rs measures them: CPU of
# each process from 2 s to 6 s after it started, from /proc/PID/stat.
# usage: idle-s18.sh BIN TIER   (TIER: embedded | node | network)
BIN=$1; TIER=$2
tag=idle$$$RANDOM
case $TIER in
  embedded) AIR_TEST_TAG=$tag $BIN run ysb --workers 2 --no-pin --rate 1000 --duration 8 >/dev/null 2>&1 & n=1 ;;
  node) AIR_TEST_TAG=$tag mpirun.mpich -np 2 $BIN run ysb --workers 1 --no-pin --rate 1000 --duration 8 >/dev/null 2>&1 & n=2 ;;
  network) AIR_TEST_TAG=$tag mpirun.mpich -np 2 $BIN run ysb --workers 1 --no-pin --rate 1000 --duration 8 --force-network >/dev/null 2>&1 & n=2 ;;
esac
sleep 0.3
for i in $(seq 100); do
  pids=$(for p in $(pgrep -f "^$BIN run"); do tr '\0' '\n' </proc/$p/environ 2>/dev/null | grep -qx "AIR_TEST_TAG=$tag" && echo $p; done)
  [ $(echo $pids | wc -w) -eq $n ] && break; sleep 0.05; done
sleep 2
cpu() { awk '{print $14+$15}' /proc/$1/stat; }
wakes() { cat /proc/$1/task/*/status 2>/dev/null | awk '/^Name:/{w=($2 ~ /^air-w/)} /^voluntary_ctxt_switches/{if(w) s+=$2} END{print s+0}'; }
declare -A a w; for p in $pids; do a[$p]=$(cpu $p); w[$p]=$(wakes $p); done
sleep 4
out=""; for p in $pids; do out="$out $(awk -v t=$(( $(cpu $p) - ${a[$p]} )) 'BEGIN{printf "%.2f", t/4}')%,$(( ($(wakes $p) - ${w[$p]}) / 4 ))/s"; done
echo "$(basename $BIN) $TIER load=$(cut -d' ' -f1 /proc/loadavg) per-process cpu%,worker-wakeups:$out"
wait
