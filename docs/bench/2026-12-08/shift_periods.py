#!/usr/bin/env python3
"""Per-period load around each hot-key shift of a paced `air run wa
--zipf-shift-ms MS --rate R` report (event time = wall clock, so the
shifts fall at Unix ms multiples of MS): the periods' max/mean before and
after each shift, and how many periods after it the load is back under a
bound. Usage: shift_periods.py REPORT.json SHIFT_MS [BOUND=1.1]"""
import json
import statistics
import sys

rep = json.load(open(sys.argv[1]))
shift_ms = int(sys.argv[2])
bound = float(sys.argv[3]) if len(sys.argv) > 3 else 1.1
p = rep["load"]["periods"]
ratios, period, t0 = p["max_over_mean"], p["period_ms"], p["start_unix_ms"]
n = len(ratios)
fmt = lambda x: "-" if x is None else f"{x:.2f}"
print(f"{sys.argv[1]}: {n} periods of {period} ms at {p['stage']!r}; "
      f"median max/mean {statistics.median([r for r in ratios if r]):.2f}")
first = (t0 // shift_ms + 1) * shift_ms
back = []
for s in range(first, t0 + n * period, shift_ms):
    k = (s - t0) // period  # the period the shift falls in
    if k + 1 >= n - 1:
        break
    before = ratios[max(0, k - 3):k]
    after = ratios[k:k + 8]
    # Periods from the one the shift falls in until one under the bound.
    j = next((i for i in range(k, n - 1) if ratios[i] is not None and ratios[i] <= bound), None)
    took = None if j is None else j - k
    back.append(took)
    print(f"shift at +{(s - t0) / 1000:.1f} s (period {k}): before {' '.join(map(fmt, before))} | "
          f"after {' '.join(map(fmt, after))} | under {bound} after {took} periods")
print(f"periods to come back under {bound}: {back}")
