#!/bin/bash
# YSB with and without --metrics (and with a scraper polling every $SCRAPE_S s, default 0.2),
# one binary, interleaved ABCCBA. Usage: metrics-cost.sh ROUNDS EVENTS
# (binary: $AIR, default /tmp/lv/air).
set -u
AIR=${AIR:-/tmp/lv/air}; R=${1:-6}; N=${2:-300000000}
rate(){ grep -oE "= [0-9.]+ M events/s" | grep -oE "[0-9.]+"; }
off(){ $AIR run ysb --workers 2 --events $N 2>&1 | rate; }
on(){ $AIR run ysb --workers 2 --events $N --metrics 127.0.0.1:0 2>&1 | rate; }
scraped(){ P=$((9400 + RANDOM % 500))
  ( while sleep ${SCRAPE_S:-0.2}; do curl -s -o /dev/null http://127.0.0.1:$P/metrics || true; done ) & S=$!
  $AIR run ysb --workers 2 --events $N --metrics 127.0.0.1:$P 2>&1 | rate; kill $S; wait $S 2>/dev/null; }
for r in $(seq $R); do for m in off on scraped scraped on off; do echo "$m $($m)"; done; done
