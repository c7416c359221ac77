#!/usr/bin/env bash
# The estimator's accuracy on a many-core machine, in lanes side by side
# (bench_estimator_accuracy.py --shard/--pin/--watch pinned), one lane per physical core:
#
# - with a usable GPU (CuPy sees one), a "devices" lane on the first two physical cores: the
#   same training program on the GPU and on four CPU threads, AlloX's two kinds of machine;
# - "threads" lanes (1 and 2 BLAS threads) on the other physical cores but the last, which is
#   left to the system; together they cover all 22 CPU workloads.
#
# Every lane stops at LIMIT seconds (what it measured is kept: its JSON is rewritten after every
# workload); then the lanes are merged into one summary per kind of lane.
#
#   tests/benchmarks/estimator_accuracy_lanes.sh OUTDIR [LIMIT_SECONDS] [TARGET_SCALE] [REPEATS]
#
# REPEATS 2 runs every full run twice: the summaries then also give the machine's floor, how
# well a full run predicts its repeat (no sample can do better on that machine).
#
# OUTDIR gets summary.txt (machine facts, merged summaries) and lanes.tar.gz (each lane's log
# and JSON). Run it on a machine with nothing else running: the lanes' "others" column shows
# what else ran on their CPUs.
set -u
out=${1:?usage: $0 OUTDIR [LIMIT_SECONDS] [TARGET_SCALE] [REPEATS]}
limit=${2:-400}
scale=${3:-1}
repeats=${4:-1}
here=$(cd "$(dirname "$0")" && pwd)
bench="$here/bench_estimator_accuracy.py"
python=${PYTHON:-python3}
work=$(mktemp -d)
mkdir -p "$out"
summary="$out/summary.txt"

# Physical cores as comma-separated CPU lists ("0,8" with SMT, "3" without), in order.
mapfile -t cores < <("$python" - <<'PY'
import glob
def expand(text):
    cpus = []
    for part in text.strip().split(","):
        low, _, high = part.partition("-")
        cpus += range(int(low), int(high or low) + 1)
    return tuple(cpus)
cores = {expand(open(path).read()) for path in glob.glob("/sys/devices/system/cpu/cpu[0-9]*/topology/thread_siblings_list")}
for core in sorted(cores):
    print(",".join(map(str, core)))
PY
)
{
    echo "== machine"
    date -u
    echo "cpus $(nproc); physical cores ${#cores[@]} (CPUs of each): ${cores[*]}"
    grep -m1 "model name" /proc/cpuinfo
    nvidia-smi -L 2>/dev/null || echo "no nvidia-smi"
    "$python" -c "import sys, numpy; print('python', sys.version.split()[0], 'numpy', numpy.__version__)"
    "$python" -c "import cupy; print('cupy', cupy.__version__, 'gpus', cupy.cuda.runtime.getDeviceCount())" 2>/dev/null || echo "no usable CuPy"
    uptime
} >"$summary" 2>&1

gpu=0
"$python" -c "import cupy, sys; sys.exit(0 if cupy.cuda.runtime.getDeviceCount() else 1)" 2>/dev/null && gpu=1

# CPUs of a lane: one physical core with SMT (its two siblings), else two neighbouring CPUs.
lanes=()
if [[ ${cores[0]} == *,* ]]; then
    lanes=("${cores[@]}")
else
    for ((i = 0; i + 1 < ${#cores[@]}; i += 2)); do lanes+=("${cores[i]},${cores[i + 1]}"); done
fi
first=0
pids=()
if ((gpu)) && ((${#lanes[@]} >= 4)); then
    timeout -s TERM "$limit" "$python" "$bench" --configurations devices --pin "${lanes[0]},${lanes[1]}" --watch pinned \
        --wait-quiet 0 --retries 0 --target-scale "$scale" --repeats "$repeats" --alternative 0.005,0.015 \
        --json "$work/devices.json" >"$work/devices.log" 2>&1 &
    pids+=($!)
    first=2
fi
count=$((${#lanes[@]} - first - 1))  # the last lane's CPUs are left to the system
((count >= 1)) || count=1
for ((i = 0; i < count; i++)); do
    timeout -s TERM "$limit" "$python" "$bench" --configurations threads --pin "${lanes[first + i]}" --watch pinned \
        --wait-quiet 0 --retries 0 --target-scale "$scale" --repeats "$repeats" --alternative 0.005,0.015 --shard "$((i + 1))/$count" \
        --json "$work/threads-$((i + 1)).json" >"$work/threads-$((i + 1)).log" 2>&1 &
    pids+=($!)
done
wait "${pids[@]}"

{
    echo
    echo "== lanes: ${#pids[@]} ($([[ $gpu == 1 ]] && echo "devices on ${lanes[0]},${lanes[1]}; ")threads on ${lanes[*]:first:count}), limit ${limit} s, target scale ${scale}, ${repeats} full run(s) each"
    uptime
    if [[ -f $work/devices.json ]]; then
        echo
        echo "== devices (gpu / cpu-4): the rows"
        grep -E "^(mlp|workload)" "$work/devices.log"
        echo
        echo "== devices: summary"
        "$python" "$bench" --merge "$work/devices.json"
    fi
    echo
    echo "== threads (1-thread / 2-threads): summary of the lanes"
    "$python" "$bench" --merge "$work"/threads-*.json
} >>"$summary" 2>&1
tar -czf "$out/lanes.tar.gz" -C "$work" .
cat "$summary"
