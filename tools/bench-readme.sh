#!/usr/bin/env bash
# Regenerates every figure of the README's "Performance" section on this
# machine, each beside the exact command line that made it, with the
# machine's description (machine.txt) and SUMMARY.md: the headline number of
# every section with its command, to update the README from.
#
# Usage: tools/bench-readme.sh [--only SECTION,...] [--quick] [OUT_DIR]
#   OUT_DIR      where everything goes (default: bench-out/)
#   --only LIST  run only these sections, comma-separated (machine.txt and
#                SUMMARY.md are always written)
#   --quick      shrink every run (events, durations, repeats) to a smoke
#                test of a few minutes; its figures are NOT for the README
#                (every output file says so)
#   -h, --help   this text
#
# Sections, in the order they run (default: all but soak):
#   machine      machine.txt: date, CPU model, CPUs allowed, NUMA nodes,
#                memory, OS, kernel, rustc, MPI version, git revision (and
#                whether the tree is dirty), load average before and after
#   topo         topo.txt: `air topo` and lscpu
#   ring         ring.{txt,csv,png}: `air bench ring` (issue 2)
#   ysb          ysb.txt, ysb-*.json: YSB pre-aggregated and --shuffle, 1 and
#                2 workers, 3 runs each (issue 3)
#   placement    placement-ring.{txt,csv,png}: pinned vs unpinned ring;
#                placement-ysb.txt: `air run ysb` vs `--no-pin`, 5 rounds
#   files        files.txt: YSB from a 4 M-event JSON file (about 1 GB,
#                generated once into OUT_DIR), 1 and 2 workers, query-fields
#   latency      latency.{txt,json}, latency-cdf.png: YSB at 50 M events/s
#                for 25 s, latency percentiles and the latency plot
#   workloads    workloads.txt: WA, NEXMark q1 q2 q5 q7 q8, word count
#                (about 100 MB of text generated into OUT_DIR), 1 and 2
#                workers, 3 runs each (issue 6)
#   mpi          (needs mpirun) mpi-ysb.txt: YSB embedded vs mpirun -np 2
#                node and network tiers, 5 rounds; rma.{txt,csv,png}:
#                `air bench rma`; exchange.txt: `air bench exchange` on each
#                tier; putbw.txt: `air-rdma-selftest putbw` (issue 4)
#   sustainable  sustainable.{txt,json,png}, sustainable-probes.csv:
#                `air bench ysb --sustainable --duration 15` (issue 8)
#   scale        scale.{txt,csv,png}: `air bench scale -- ysb`, workers 1..W
#                (and ranks 1, 2, 4, …, CPUs under mpirun when MPI is there)
#   peers        peers.{txt,csv}: `peers-ysb`: air vs timely-dataflow vs a
#                crossbeam-channel pipeline vs the generator roof (issue 8)
#   profile      profile.txt, callgrind.out, callgrind-annotate.txt:
#                instructions per event and their split (valgrind), the YSB
#                generator's criterion bench, the NEXMark generator's speed
#                ("where the time goes")
#   soak         soak/: tools/soak.sh (its own rate search, then 10 minutes
#                at 80% of it; about 13 minutes): ONLY with --only soak
#
# Without mpirun the `mpi` section is skipped (and `scale` has no rank
# points) unless --only asks for it, which then fails. A missing tool for a
# selected section (valgrind, python3, cargo, ...) stops the script before
# anything runs. Builds first: `air` with the features mpi and hwloc when
# available, plus peers-ysb, air-rdma-selftest and the profile's bench and
# test as the sections need them (log: OUT_DIR/build.log).
# Run it on an otherwise idle machine: the default set takes about 10
# minutes on the 2-vCPU development VM, plus the builds (the soak: 13 more);
# --quick about 2 minutes plus the builds. OUT_DIR gets about 1.1 GB of
# generated input (kept and reused by later runs into the same OUT_DIR).
set -euo pipefail

die() { echo "bench-readme: $*" >&2; exit 1; }
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }

all_sections="machine topo ring ysb placement files latency workloads mpi sustainable scale peers profile soak"
default_sections="machine topo ring ysb placement files latency workloads mpi sustainable scale peers profile"
only="" quick=0 out=""
while [ $# -gt 0 ]; do
    case $1 in
        --only) [ $# -ge 2 ] || die "--only needs a list of sections"; only=$2; shift 2 ;;
        --only=*) only=${1#--only=}; shift ;;
        --quick) quick=1; shift ;;
        -h | --help) usage; exit 0 ;;
        -*) usage >&2; die "unknown option: $1" ;;
        *) [ -z "$out" ] || die "one OUT_DIR only (got $out and $1)"; out=$1; shift ;;
    esac
done
# OUT_DIR is relative to where the script was called from; then work from
# the repository root, and show paths inside it relative to it.
if [ -n "$out" ]; then
    mkdir -p "$out"
    out=$(cd "$out" && pwd)
fi
cd "$(dirname "$0")/.."
root=$PWD
out=${out:-$root/bench-out}
mkdir -p "$out"
out=${out#"$root"/}

has_mpi=0
command -v mpirun >/dev/null && has_mpi=1
if [ -n "$only" ]; then
    sections=" machine "
    for s in ${only//,/ }; do
        case " $all_sections " in
            *" $s "*) sections+="$s " ;;
            *) die "unknown section '$s' (sections: $all_sections)" ;;
        esac
    done
    if [[ $sections == *" mpi "* ]] && [ $has_mpi = 0 ]; then
        die "section mpi asked for, but mpirun is not on PATH (install MPICH or Open MPI)"
    fi
else
    sections=" $default_sections "
    if [ $has_mpi = 0 ]; then
        sections=${sections/ mpi / }
        echo "bench-readme: mpirun not found: skipping the mpi section and scale's rank points" >&2
    fi
fi
want() { [[ $sections == *" $1 "* ]]; }
# pick FULL QUICK: the value for this mode.
pick() { if [ $quick = 1 ]; then echo "$2"; else echo "$1"; fi; }

# ---------------------------------------------------------------- tools
need() { command -v "$1" >/dev/null || die "$1 not found: $2"; }
need cargo "install Rust (rustup)"
need python3 "needed for the summaries and the word-count input"
stats() { python3 tools/bench-readme-stats.py "$@"; }
want profile && need valgrind "the profile section needs it (apt-get install valgrind), or leave profile out of --only"
want soak && { [ -x tools/soak.sh ] || die "tools/soak.sh missing or not executable"; }

# ---------------------------------------------------------------- build
features=()
if [ $has_mpi = 1 ]; then features+=(mpi); fi
if pkg-config --exists hwloc 2>/dev/null; then features+=(hwloc); fi
feature_args=()
if [ ${#features[@]} -gt 0 ]; then
    feature_args=(--features "$(IFS=,; echo "${features[*]}")")
fi
: >"$out/build.log"
build() {
    echo "\$ cargo $*" | tee -a "$out/build.log" >&2
    if ! cargo "$@" >>"$out/build.log" 2>&1; then
        tail -n 30 "$out/build.log" >&2
        die "build failed: cargo $* (log: $out/build.log)"
    fi
}
build build --release -j2 "${feature_args[@]}"
air=target/release/air
[ -x $air ] || die "$air was not built"
if want peers; then
    build build --release -j2 -p air-peers
    [ -x target/release/peers-ysb ] || die "target/release/peers-ysb was not built (cargo build --release -j2 -p air-peers)"
fi
if want mpi; then
    build build --release -j2 -p air-rdma --bin air-rdma-selftest
    [ -x target/release/air-rdma-selftest ] || die "target/release/air-rdma-selftest was not built"
fi
if want profile; then
    build bench --no-run -j2 -p air-operators --bench ysb
    build test --release --no-run -j2 -p air-operators --test nexmark_gen
fi

# ---------------------------------------------------------------- helpers
stamp() { date -u +%FT%TZ; }
quick_note="QUICK smoke run (tools/bench-readme.sh --quick): shrunken runs, figures NOT for the README"
# show ARGS...: the command line as one could paste it (quoting only where needed).
show() {
    local a s=""
    for a in "$@"; do
        if [[ $a =~ ^[A-Za-z0-9_./:=,@%+-]+$ ]]; then s+="$a "; else s+="'${a//\'/\'\\\'\'}' "; fi
    done
    echo "${s% }"
}
# begin FILE: start a section's output file.
begin() {
    echo "# tools/bench-readme.sh, section $section, $(stamp); commands as run from the repository root" >"$1"
    if [ $quick = 1 ]; then echo "# $quick_note" >>"$1"; fi
}
# run FILE CMD...: write the command line into FILE (and the terminal), run
# it, append its output (stdout and stderr) to FILE.
run() {
    local file=$1; shift
    last_cmd=$(show "$@")
    echo "$last_cmd" >>"$out/commands.txt"
    printf '\n$ %s\n' "$last_cmd" | tee -a "$file"
    "$@" 2>&1 | tee -a "$file"
}
sum() { printf '%s\n' "$@" >>"$out/SUMMARY.md"; }
# figure TEXT: one headline with the command that made it (the last run).
figure() { sum "- \`$last_cmd\`" "  $*"; }
section=""
section_start=0
start() {
    section=$1
    section_start=$SECONDS
    echo "== $section ($(stamp))" >&2
    sum "" "## $section: $2" ""
}
finish() { sum "" "($section: $((SECONDS - section_start)) s)"; }

# ---------------------------------------------------------------- machine
mpi_version() {
    local v ver dev
    v=$(mpirun --version 2>&1 || true)
    if grep -q 'Open MPI' <<<"$v"; then
        grep -m1 'Open MPI' <<<"$v"
    elif grep -q 'HYDRA' <<<"$v"; then
        ver=$(sed -n 's/^ *Version: *//p' <<<"$v" | head -n1)
        dev=$(grep -o "with-device=[^' ]*" <<<"$v" | head -n1 || true)
        echo "MPICH $ver (Hydra mpirun${dev:+, configured $dev})"
    else
        head -n1 <<<"$v"
    fi
}
lscpu_field() { lscpu 2>/dev/null | sed -n "s/^$1: *//p" | head -n1; }
git_rev() {
    local rev changed
    rev=$(git rev-parse --short HEAD 2>/dev/null) || { echo "unknown (not a git checkout)"; return; }
    # --no-optional-locks: read-only, no index refresh.
    changed=$(git --no-optional-locks status --porcelain --untracked-files=no 2>/dev/null | wc -l)
    if [ "$changed" -gt 0 ]; then echo "$rev, dirty ($changed tracked file(s) modified)"; else echo "$rev, clean"; fi
}

section=machine
begin "$out/machine.txt"
: >"$out/commands.txt"
cpu=$(lscpu_field 'Model name')
[ -n "$cpu" ] || cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')
{
    echo "date: $(stamp)"
    echo "mode: $([ $quick = 1 ] && echo "$quick_note" || echo "full")"
    echo "sections: $(echo "$sections" | xargs)"
    echo "git: $(git_rev)"
    echo "cpu: $cpu"
    echo "cpus: $(nproc) allowed ($(taskset -pc $$ 2>/dev/null | cut -d: -f2 | tr -d ' ')) of $(getconf _NPROCESSORS_ONLN);" \
        "$(lscpu_field 'Socket(s)') socket(s), $(lscpu_field 'Core(s) per socket') core(s) per socket," \
        "$(lscpu_field 'Thread(s) per core') thread(s) per core"
    echo "numa nodes: $(lscpu_field 'NUMA node(s)')"
    echo "topology (air topo): $($air topo 2>/dev/null | head -n1)"
    echo "memory: $(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo); /dev/shm $(df -h --output=size /dev/shm 2>/dev/null | tail -n1 | tr -d ' ')"
    # shellcheck source=/dev/null
    echo "os: $(. /etc/os-release 2>/dev/null && echo "${PRETTY_NAME:-unknown}"), kernel $(uname -r)"
    echo "rustc: $(rustc --version)"
    echo "air built with: cargo build --release -j2 ${feature_args[*]}"
    if [ $has_mpi = 1 ]; then echo "mpi: $(mpi_version)"; else echo "mpi: none (mpirun not on PATH)"; fi
    echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee -a "$out/machine.txt"

{
    echo "# Figures for the README's performance section"
    echo
    if [ $quick = 1 ]; then echo "**$quick_note.**" && echo; fi
    echo "Made by \`tools/bench-readme.sh${only:+ --only $only}$([ $quick = 1 ] && echo " --quick") $out\`;"
    echo "every command below was run from the repository root; each section's"
    echo "output file has the command lines beside their output."
    echo
    echo '```'
    cat "$out/machine.txt"
    echo '```'
} >"$out/SUMMARY.md"
on_exit() {
    local st=$?
    if [ $st != 0 ]; then sum "" "**INCOMPLETE: the script stopped with status $st in section $section.**"; fi
}
trap on_exit EXIT

# ---------------------------------------------------------------- topo
if want topo; then
    start topo "\`air topo\`"
    f=$out/topo.txt
    begin "$f"
    run "$f" $air topo
    sum '```' "$(sed -n '/^\$ /,$p' "$f" | tail -n +2)" '```'
    if command -v lscpu >/dev/null; then run "$f" lscpu; fi
    finish
fi

# ---------------------------------------------------------------- ring
if want ring; then
    start ring "\`air bench ring\` (issue 2)"
    f=$out/ring.txt
    begin "$f"
    a=()
    if [ $quick = 1 ]; then a=(--sizes "64,64K,1M" --repeats 1 --duration-ms 10); fi
    run "$f" $air bench ring "${a[@]}" --csv "$out/ring.csv" --plot "$out/ring.png"
    figure "→ ring.txt (table), ring.csv, ring.png; its targets:"
    sum '```'
    grep -E '^#   |^# the benchmark threads|^# total time' "$f" | sed 's/^# *//' >>"$out/SUMMARY.md" || true
    sum '```'
    finish
fi

# ysb_runs FILE NAME REPEATS QUERY-ARGS...: REPEATS runs of `air run ysb`, one report each.
ysb_runs() {
    local f=$1 name=$2 r=$3 i reps=()
    shift 3
    for i in $(seq "$r"); do
        run "$f" $air run ysb "$@" --report "$out/$name-$i.json"
        reps+=("$out/$name-$i.json")
    done
    figure "×$r ($name-*.json): $(stats runs "${reps[@]}")"
}

# ---------------------------------------------------------------- ysb
if want ysb; then
    start ysb "YSB (issue 3), events/s"
    f=$out/ysb.txt
    begin "$f"
    r=$(pick 3 1)
    ysb_runs "$f" ysb-preagg-w1 "$r" --events "$(pick 300000000 3000000)" --workers 1
    ysb_runs "$f" ysb-preagg-w2 "$r" --events "$(pick 600000000 6000000)" --workers 2
    ysb_runs "$f" ysb-shuffle-w1 "$r" --events "$(pick 100000000 1000000)" --workers 1 --shuffle
    ysb_runs "$f" ysb-shuffle-w2 "$r" --events "$(pick 200000000 2000000)" --workers 2 --shuffle
    finish
fi

# ---------------------------------------------------------------- placement
if want placement; then
    start placement "pinned vs unpinned (issue 5)"
    f=$out/placement-ring.txt
    begin "$f"
    a=(--sizes "64,4K,64K,1M" --repeats 9)
    if [ $quick = 1 ]; then a=(--sizes "64,64K" --repeats 1 --duration-ms 10); fi
    run "$f" $air bench ring --mode thread --only ring,unpinned "${a[@]}" \
        --csv "$out/placement-ring.csv" --plot "$out/placement-ring.png"
    figure "→ placement-ring.txt, placement-ring.csv, placement-ring.png:"
    sum '```'
    grep -E '^#   .*pinned' "$f" | sed 's/^# *//' >>"$out/SUMMARY.md" || true
    sum '```'
    f=$out/placement-ysb.txt
    begin "$f"
    ev=() pinned=() nopin=()
    if [ $quick = 1 ]; then ev=(--events 10000000); fi
    for i in $(seq "$(pick 5 1)"); do
        run "$f" $air run ysb "${ev[@]}" --report "$out/placement-pinned-$i.json"
        pinned+=("$out/placement-pinned-$i.json")
        run "$f" $air run ysb "${ev[@]}" --no-pin --report "$out/placement-nopin-$i.json"
        nopin+=("$out/placement-nopin-$i.json")
    done
    sum "- \`$(show $air run ysb "${ev[@]}")\` vs \`… --no-pin\`, ${#pinned[@]} interleaved round(s) (placement-ysb.txt):" \
        "  pinned $(stats runs "${pinned[@]}")" \
        "  no-pin $(stats runs "${nopin[@]}")" \
        "  pinned / no-pin $(stats compare "${pinned[@]}" -- "${nopin[@]}")"
    finish
fi

# ---------------------------------------------------------------- files
if want files; then
    start files "YSB from a JSON file (issue 3)"
    f=$out/files.txt
    begin "$f"
    n=$(pick 4000000 200000)
    input=$out/ysb-events-$n.json campaigns=$out/ysb-campaigns-$n.txt
    if [ -s "$input" ] && [ -s "$campaigns" ]; then
        echo "(reusing $input and $campaigns, made earlier by: $air gen ysb --events $n --out $input --campaigns-out $campaigns)" | tee -a "$f"
    else
        run "$f" $air gen ysb --events "$n" --out "$input" --campaigns-out "$campaigns"
    fi
    sum "- input: \`$air gen ysb --events $n --out $input --campaigns-out $campaigns\`: $(du -m "$input" | cut -f1) MB"
    r=$(pick 3 1)
    ysb_runs "$f" file-w1 "$r" --input "$input" --campaigns "$campaigns" --workers 1
    ysb_runs "$f" file-w2 "$r" --input "$input" --campaigns "$campaigns" --workers 2
    ysb_runs "$f" file-qf-w2 "$r" --input "$input" --campaigns "$campaigns" --workers 2 --parse query-fields
    finish
fi

# ---------------------------------------------------------------- latency
if want latency; then
    start latency "YSB at a fixed rate: latency (issue 3) and its plot"
    f=$out/latency.txt
    begin "$f"
    run "$f" $air run ysb --rate "$(pick 50000000 10000000)" --duration "$(pick 25 3)" \
        --report "$out/latency.json" --latency-plot "$out/latency-cdf.png"
    figure "→ latency.txt, latency.json, latency-cdf.png: $(stats latency "$out/latency.json")"
    finish
fi

# ---------------------------------------------------------------- workloads
# workload FILE NAME EVENTS_PER_WORKER|- QUERY-ARGS...: 1 and 2 workers, repeats each.
# EVENTS_PER_WORKER: --events is that times the workers ("-": the args say).
workload() {
    local f=$1 name=$2 epw=$3 w i reps ev
    shift 3
    for w in 1 2; do
        reps=() ev=()
        if [ "$epw" != - ]; then ev=(--events $((epw * w))); fi
        for i in $(seq "$(pick 3 1)"); do
            run "$f" $air run "$@" "${ev[@]}" --workers $w --report "$out/$name-w$w-$i.json"
            reps+=("$out/$name-w$w-$i.json")
        done
        if [ "$1" = wordcount ]; then
            figure "×${#reps[@]}: $(stats wordcount "${reps[@]}")"
        else
            figure "×${#reps[@]}: $(stats runs "${reps[@]}")"
        fi
    done
}
if want workloads; then
    start workloads "WA, NEXMark, word count (issue 6), per worker"
    f=$out/workloads.txt
    begin "$f"
    workload "$f" wa "$(pick 100000000 2000000)" wa
    for q in q1 q2 q7; do workload "$f" "nexmark-$q" - nexmark --query $q --events "$(pick 100000000 2000000)"; done
    for q in q5 q8; do workload "$f" "nexmark-$q" - nexmark --query $q --events "$(pick 30000000 600000)"; done
    lines=$(pick 200000 4000)
    words=$out/words-$lines.txt
    if [ ! -s "$words" ]; then
        # $lines lines of 80 words drawn (seed 1) from w0 … w49999: ~108 MB,
        # 16 M words, 50 000 distinct for 200 000 lines.
        run "$f" python3 -c "
import random, sys
r = random.Random(1)
words = ['w%d' % i for i in range(50000)]
with open(sys.argv[2], 'w') as f:
    for _ in range(int(sys.argv[1])):
        f.write(' '.join(r.choice(words) for _ in range(80)) + '\n')
" "$lines" "$words"
    fi
    workload "$f" wordcount - wordcount --input "$words"
    finish
fi

# ---------------------------------------------------------------- mpi
if want mpi; then
    start mpi "distributed runs (issue 4), $(mpi_version)"
    f=$out/mpi-ysb.txt
    begin "$f"
    ev=(--events "$(pick 200000000 10000000)")
    emb=() node=() net=()
    for i in $(seq "$(pick 5 1)"); do
        run "$f" $air run ysb "${ev[@]}" --workers 2 --report "$out/mpi-ysb-embedded-$i.json"
        emb+=("$out/mpi-ysb-embedded-$i.json")
        run "$f" mpirun -np 2 $air run ysb "${ev[@]}" --workers 1 --report "$out/mpi-ysb-node-$i.json"
        node+=("$out/mpi-ysb-node-$i.json")
        run "$f" mpirun -np 2 $air run ysb "${ev[@]}" --workers 1 --force-network --report "$out/mpi-ysb-network-$i.json"
        net+=("$out/mpi-ysb-network-$i.json")
    done
    sum "- ${#emb[@]} interleaved round(s) (mpi-ysb.txt):" \
        "  - \`$(show $air run ysb "${ev[@]}" --workers 2)\` (embedded): $(stats runs "${emb[@]}")" \
        "  - \`$(show mpirun -np 2 $air run ysb "${ev[@]}" --workers 1)\` (node tier): $(stats runs "${node[@]}"); to embedded: $(stats compare "${node[@]}" -- "${emb[@]}")" \
        "  - \`$(show mpirun -np 2 $air run ysb "${ev[@]}" --workers 1 --force-network)\` (network tier): $(stats runs "${net[@]}"); to embedded: $(stats compare "${net[@]}" -- "${emb[@]}")"

    f=$out/rma.txt
    begin "$f"
    a=()
    if [ $quick = 1 ]; then a=(--sizes "8,64K,1M" --duration-ms 20 --repeats 1 --latency-iters 200); fi
    run "$f" mpirun -np 2 $air bench rma "${a[@]}" --csv "$out/rma.csv" --plot "$out/rma.png"
    figure "→ rma.txt, rma.csv, rma.png:"
    sum '```'
    sed -n '/^\$ /,$p' "$f" | tail -n +2 >>"$out/SUMMARY.md"
    sum '```'

    f=$out/exchange.txt
    begin "$f"
    a=()
    if [ $quick = 1 ]; then a=(--records 1000000 --repeats 1); fi
    run "$f" $air bench exchange --workers 2 "${a[@]}"
    figure "(thread tier) $(tail -n1 "$f")"
    run "$f" mpirun -np 2 $air bench exchange --workers 1 "${a[@]}"
    figure "(node tier) $(tail -n1 "$f")"
    run "$f" mpirun -np 2 $air bench exchange --workers 1 --force-network "${a[@]}"
    figure "(network tier) $(tail -n1 "$f")"

    f=$out/putbw.txt
    begin "$f"
    run "$f" mpirun -np 2 target/release/air-rdma-selftest putbw
    figure "(MPI_Put + flush of 1 MiB):" "$(sed -n '/^\$ /,$p' "$f" | tail -n +2 | sed 's/^/  /')"
    finish
fi

# ---------------------------------------------------------------- sustainable
if want sustainable; then
    start sustainable "sustainable YSB throughput (issue 8)"
    f=$out/sustainable.txt
    begin "$f"
    a=(--duration 15)
    if [ $quick = 1 ]; then a=(--duration 2 --precision 0.25); fi
    run "$f" $air bench ysb --sustainable "${a[@]}" --csv "$out/sustainable-probes.csv" \
        --plot "$out/sustainable.png" --report "$out/sustainable.json"
    figure "→ sustainable.txt, sustainable-probes.csv, sustainable.json, sustainable.png:"
    sum "" "$(stats sustainable "$out/sustainable.json" "$out/sustainable-probes.csv")"
    finish
fi

# ---------------------------------------------------------------- scale
if want scale; then
    start scale "strong scaling of YSB"
    f=$out/scale.txt
    begin "$f"
    a=(--repeats "$(pick 3 1)")
    if [ $has_mpi = 1 ]; then
        # ranks 1, 2, 4, … and the CPU count, one worker each
        ranks=1 k=2
        while [ $k -lt "$(nproc)" ]; do ranks+=",$k"; k=$((k * 2)); done
        if [ "$(nproc)" -gt 1 ]; then ranks+=",$(nproc)"; fi
        a+=(--ranks "$ranks")
    fi
    run "$f" $air bench scale "${a[@]}" --csv "$out/scale.csv" --plot "$out/scale.png" \
        -- ysb --events "$(pick 200000000 20000000)"
    figure "→ scale.txt, scale.csv, scale.png:"
    sum "" "$(stats scale "$out/scale.csv")"
    finish
fi

# ---------------------------------------------------------------- peers
if want peers; then
    start peers "air vs timely-dataflow vs crossbeam-channel (issue 8)"
    f=$out/peers.txt
    begin "$f"
    run "$f" target/release/peers-ysb --workers 2 --events "$(pick 200000000 10000000)" --repeats "$(pick 3 1)" \
        --peers timely,crossbeam,roof --air $air --csv "$out/peers.csv"
    figure "→ peers.txt, peers.csv:"
    sum "" "$(stats peers "$out/peers.csv")"
    finish
fi

# ---------------------------------------------------------------- profile
if want profile; then
    start profile "where the time goes (issues 3 and 6)"
    f=$out/profile.txt
    begin "$f"
    n=$(pick 2000000 200000)
    run "$f" valgrind --tool=callgrind --callgrind-out-file="$out/callgrind.out" $air run ysb --events "$n" --workers 1
    ann=()
    if command -v callgrind_annotate >/dev/null; then
        begin "$out/callgrind-annotate.txt"
        run "$out/callgrind-annotate.txt" callgrind_annotate --auto=no --threshold=95 "$out/callgrind.out" >/dev/null
        ann=("$out/callgrind-annotate.txt")
    fi
    sum "- \`$(show valgrind --tool=callgrind --callgrind-out-file="$out/callgrind.out" $air run ysb --events "$n" --workers 1)\`" \
        "  → profile.txt, callgrind.out${ann[*]:+, callgrind-annotate.txt (\`$last_cmd\`)}: $(stats callgrind "$out/callgrind.out" "$n" "${ann[@]}")"
    a=()
    if [ $quick = 1 ]; then a=(--warm-up-time 0.5 --measurement-time 1); fi
    run "$f" cargo bench -j2 -p air-operators --bench ysb -- ysb_generator "${a[@]}"
    figure "(criterion, elements = events):"
    sum '```'
    awk '/^\$ cargo bench/ { on = 1 } on && /^[a-z_]+\// { name = $1 } on && /thrpt:/ && !/%/ { sub(/^ */, ""); print name, $0 }' "$f" >>"$out/SUMMARY.md"
    sum '```'
    run "$f" cargo test --release -j2 -p air-operators --test nexmark_gen -- --ignored --nocapture --exact generator_speed
    figure "$(grep -m1 'NexmarkGenerator::fill' "$f" || echo "(no NexmarkGenerator::fill line)")"
    finish
fi

# ---------------------------------------------------------------- soak
if want soak; then
    start soak "10 minutes at 80% of the sustainable rate (issue 7)"
    f=$out/soak.txt
    begin "$f"
    env_args=()
    if [ $quick = 1 ]; then env_args=(SOAK_S=30 PROBE_S=2 WARMUP_S=0); fi
    # tools/soak.sh runs `cargo build --release -j2 -q` without features,
    # which would replace the air built above: a cargo on PATH that adds them.
    shim=$(mktemp -d)
    cat >"$shim/cargo" <<EOF
#!/usr/bin/env bash
if [ "\${1:-}" = build ]; then exec $(show "$(command -v cargo)") "\$@" $(show "${feature_args[@]}"); fi
exec $(show "$(command -v cargo)") "\$@"
EOF
    chmod +x "$shim/cargo"
    soak_st=0
    PATH="$shim:$PATH" run "$f" env "${env_args[@]}" tools/soak.sh "$out/soak" || soak_st=$?
    rm -r "$shim"
    figure "→ soak/ (summary.md, timeline.csv, probes.csv, sustainable.json): $([ $soak_st = 0 ] && echo "passed" || echo "**FAILED (exit $soak_st)**")"
    if [ -s "$out/soak/summary.md" ]; then sum "" "$(cat "$out/soak/summary.md")"; fi
    finish
fi

echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg); finished $(stamp), $SECONDS s in all" | tee -a "$out/machine.txt"
sum "" "load average after: $(cut -d' ' -f1-3 /proc/loadavg); $SECONDS s in all (finished $(stamp))"
echo "bench-readme: done: $out/SUMMARY.md" >&2
