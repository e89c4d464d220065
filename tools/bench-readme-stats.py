#!/usr/bin/env python3
"""Headline figures for tools/bench-readme.sh's SUMMARY.md, from the files
the `air` commands wrote (JSON reports, CSVs). One subcommand per kind:

  runs REPORT.json...          events/s of each run, the median, per worker
  compare A.json... -- B.json...  median events/s of A against B's, the ratio
  wordcount REPORT.json...     MB/s and words/s of each run, medians
  latency REPORT.json          rate read, latency percentiles, input lag
  sustainable REPORT.json CSV  the answer and a probe table (markdown)
  scale CSV                    the scaling points (markdown)
  peers CSV                    the peers table (markdown)
  callgrind FILE EVENTS [ANNOTATE.txt]  instructions per event from a callgrind output
                               (and the shares of a few functions, from callgrind_annotate)

Standard library only.
"""
import csv
import json
import statistics
import sys


def m(x):
    return f"{x / 1e6:.1f} M"


def load(path):
    with open(path) as f:
        return json.load(f)


def runs(paths):
    reps = [load(p) for p in paths]
    job = [r["events_per_s"] for r in reps]
    per = [r["events_per_s_per_worker"] for r in reps]
    w = reps[0]["workers"]  # all ranks' workers
    s = f"{' / '.join(m(x) for x in job)} events/s (job, {w} worker(s)); median {m(statistics.median(job))}"
    s += f", per worker {m(statistics.median(per))}"
    if len(per) > 1:
        s += f" ({m(min(per))}–{m(max(per))})"
    print(s)


def compare(args):
    i = args.index("--")
    a = statistics.median(load(p)["events_per_s"] for p in args[:i])
    b = statistics.median(load(p)["events_per_s"] for p in args[i + 1:])
    print(f"medians {m(a)} vs {m(b)} events/s = {a / b:.2f}x")


def wordcount(paths):
    reps = [load(p) for p in paths]
    mbs = [r["counters"]["bytes"] / r["elapsed_s"] / 1e6 for r in reps]
    wps = [r["counters"]["words"] / r["elapsed_s"] for r in reps]
    w = reps[0]["workers"]
    c = reps[0]["counters"]
    print(
        f"{' / '.join(f'{x:.0f}' for x in mbs)} MB/s (job, {w} worker(s)); median {statistics.median(mbs):.0f} MB/s"
        f" = {m(statistics.median(wps))} words/s; per worker {statistics.median(mbs) / w:.0f} MB/s"
        f" ({c['bytes'] / 1e6:.0f} MB, {c['words'] / 1e6:.1f} M words, {reps[0]['rows']:,} distinct)"
    )


def latency(path):
    r = load(path)
    lat = r["latency_ms"] or {}
    lag = r.get("input_lag_max_ms")
    print(
        f"{m(r['events_per_s'])} events/s read ({r['workers']} workers, {r['windows_emitted']} window(s) emitted);"
        f" latency p50 {lat.get('p50_ms')} ms, p95 {lat.get('p95_ms')} ms, p99 {lat.get('p99_ms')} ms,"
        f" max {lat.get('max_ms')} ms ({lat.get('samples')} rows); input lag max "
        + (f"{lag:.1f} ms" if lag is not None else "n/a")
        + f"; peak RSS {r.get('peak_rss_bytes', 0) / 2**20:.1f} MiB"
    )


def sustainable(path, csv_path):
    r = load(path)
    a = r.get("at_sustainable") or {}
    w = r["workers"] * r["ranks"]
    rate = r["sustainable_rate"]
    print(
        f"Sustainable: **{m(rate)} events/s** ({m(rate / w)} per worker, {r['workers']} workers x {r['ranks']} rank(s)),"
        f" p99 {a.get('p99_ms')} ms, input lag max {a.get('input_lag_max_ms', 0):.0f} ms,"
        f" {a.get('cpu_cores', 0):.2f} cores busy; probes of {r['probe_s']:g} s,"
        f" keeps up = lag <= {r['max_lag_ms']:g} ms and p99 <= {r['max_p99_ms']} ms"
    )
    print()
    with open(csv_path) as f:
        rows = list(csv.DictReader(f))
    if not rows:
        return
    keys = rows[0].keys()

    def col(*names):
        for n in names:
            if n in keys:
                return n
        return None

    rate_k = col("rate", "rate_events_per_s")
    rows.sort(key=lambda x: float(x[rate_k]))
    fields = [
        ("rate (M events/s)", rate_k, lambda v: f"{float(v) / 1e6:g}"),
        ("read (M events/s)", col("events_per_s", "read_events_per_s"), lambda v: f"{float(v) / 1e6:.1f}"),
        ("p99 latency (ms)", col("p99_ms", "latency_p99_ms"), lambda v: v),
        ("input lag max (ms)", col("input_lag_max_ms", "lag_ms"), lambda v: f"{float(v):.0f}"),
        ("CPU cores busy", col("cpu_cores", "cores"), lambda v: f"{float(v):.2f}"),
        ("keeps up", col("keeps_up"), lambda v: "yes" if v.lower() in ("true", "yes", "1") else "no"),
    ]
    fields = [f for f in fields if f[1]]
    print("| " + " | ".join([fields[0][0]] + [fields[0][2](x[rate_k]) for x in rows]) + " |")
    print("|" + "---|" * (len(rows) + 1))
    for name, k, fmt in fields[1:]:
        print("| " + " | ".join([name] + [fmt(x[k]) for x in rows]) + " |")


def scale(path):
    with open(path) as f:
        rows = list(csv.DictReader(f))
    print("| kind | ranks | workers | M events/s | efficiency |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['kind']} | {r['ranks']} | {r['workers']} | {float(r['events_per_s']) / 1e6:.1f}"
            f" | {float(r['efficiency']) * 100:.0f} % |"
        )


def peers(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))[1:]
    print("| engine | mode | events/s | per worker | air / peer | runs (M events/s) |")
    print("|---|---|---|---|---|---|")
    for engine, mode, _workers, _events, _repeats, med, per, ratio, runs_ in rows:
        runs_ = " / ".join(f"{int(x) / 1e6:.1f}" for x in runs_.split(";") if x)
        ratio = f"{float(ratio):.2f}x" if ratio else "-"
        print(f"| {engine} | {mode} | {m(float(med))} | {float(per):.1f} M | {ratio} | {runs_} |")


def callgrind(path, events, annotate=None):
    total = None
    with open(path) as f:
        for line in f:
            if line.startswith(("summary:", "totals:")):
                total = int(line.split()[1])
    if total is None:
        sys.exit(f"{path}: no summary/totals line")
    n = int(events)
    s = f"{total:,} instructions for {n:,} events = {total / n:.0f} instructions per event (whole process, start-up included)"
    if annotate:
        # self cost per file:function line of `callgrind_annotate --auto=no`;
        # inlined code is charged to the function it was inlined into, the
        # file says where it came from.
        src = step = lookup = ld = 0
        with open(annotate) as f:
            for line in f:
                parts = line.split(None, 2)
                if len(parts) < 3 or not parts[0].replace(",", "").isdigit():
                    continue
                ir, what = int(parts[0].replace(",", "")), parts[2]
                if ("YsbSource as air_operators::stream::Source>::poll" in what
                        or "YsbGenerator::fill" in what):
                    src += ir
                elif "WindowedUpstream" in what:
                    step += ir
                    if "campaigns.rs:" in what:
                        lookup += ir
                elif "ld-linux" in what:
                    ld += ir
        s += (
            f"; the pipeline: {(src + step) / n:.0f} instructions per event, of which the source"
            f" (the generator: YsbGenerator::fill, YsbSource::poll) {src / n:.0f} ({src / (src + step) * 100:.0f} %) and the"
            f" window step (filter, lookup, window) {step / n:.0f} ({step / (src + step) * 100:.0f} %; campaign lookup {lookup / (src + step) * 100:.0f} %);"
            f" the dynamic loader {ld / total * 100:.0f} % of the whole"
        ) if src + step else "; (no YsbSource::poll / WindowedUpstream::step lines in the annotation)"
    print(s)


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    {
        "runs": lambda: runs(args),
        "compare": lambda: compare(args),
        "wordcount": lambda: wordcount(args),
        "latency": lambda: latency(args[0]),
        "sustainable": lambda: sustainable(args[0], args[1]),
        "scale": lambda: scale(args[0]),
        "peers": lambda: peers(args[0]),
        "callgrind": lambda: callgrind(*args),
    }[cmd]()


if __name__ == "__main__":
    main()
