#!/bin/sh
# Session 27 (issue 32): hot keys of WA and YSB, and hot keys that move.
# The 2-vCPU VM, 2026-12-08, release build of branch skew-ysb; other
# sessions' builds ran meanwhile (load average 5-9, see skew-wa-ysb.uptime).
set -e
air bench skew --workers 8 --events 50000000 --repeats 3 \
    --csv skew-wa-ysb.csv --plot skew-wa-ysb.png > skew-wa-ysb.txt 2> skew-wa-ysb.log
# Hot keys moving every 10 s of event time; paced, so event time is the
# wall clock and the shifts fall every 10 s of the run.
for rb in on off; do
    air run wa --keys 100000 --zipf 1.2 --zipf-shift-ms 10000 --shuffle --workers 8 \
        --rebalance $rb --rate 4000000 --duration 42 --report shift-paced-$rb.json > shift-paced-$rb.txt 2>&1
done
# Unpaced: 40 M events at 1 M events/s of event time (3 shifts in 1.4 s of
# wall time), and 800 M at 20 M events/s (3 shifts in ~40 s).
for rb in on off; do
    air run wa --keys 100000 --zipf 1.2 --zipf-shift-ms 10000 --shuffle --workers 8 \
        --rebalance $rb --events 40000000 --report shift-$rb.json > shift-$rb.txt 2>&1
    air run wa --keys 100000 --zipf 1.2 --zipf-shift-ms 10000 --events-per-s 20000000 --shuffle \
        --workers 8 --rebalance $rb --events 800000000 --report shift-fast-$rb.json > shift-fast-$rb.txt 2>&1
done
for rb in on off; do for b in 1.1 1.2; do
    python3 shift_periods.py shift-paced-$rb.json 10000 $b
done; done > shift-periods.log
