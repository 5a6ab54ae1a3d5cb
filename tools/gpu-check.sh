#!/bin/sh
# tools/gpu-check.sh - what to run on a machine with an NVIDIA GPU.
#
# Builds the CUDA tests and benchmarks (unless --run-only and the build
# directory already exists, e.g. carried to an offline device machine),
# runs the CUDA tests against the REAL driver (no stand-in), then the
# benchmarks (bench_cuda, bench_cuda_compile, bench_cuda_numba,
# `ringkernel bench pagerank --backend cuda`: the PageRank sweep with the
# device kernel and the CPU/GPU crossover, then four more runs at 10 M
# edges, and `ringkernel bench anomaly --backend cuda`: the anomaly
# pipeline with its detector on the GPU against the CPU pipeline, the
# same verdicts, transfer against compute time). Everything it reports is
# one JSON object per line (suite "gpu-check" for the tests and the
# environment; the
# benchmarks' own rows), on stdout and in the file $RK_GPU_JSON (default
# bench/results/<UTC date and time>-gpu-check.jsonl; on a lent machine
# whose files come back only from a given folder, point it there);
# progress and tables go to stderr. Exit status: 0 when every test and
# benchmark passed.
#
#   tools/gpu-check.sh [--build-only | --run-only] [BUILD_DIR]
#
# BUILD_DIR defaults to build-gpu (about 7 MB; carry it with the working
# tree to an offline device machine: --build-only here, --run-only there;
# the libraries the tests need beyond the base system travel in
# BUILD_DIR/lib). docs/benchmarks.md ("CUDA") says what each figure
# means and holds the figures of record; a run that backs one keeps its
# JSON file in bench/results/.
set -u
cd "$(dirname "$0")/.." || exit 2

mode=all
case "${1:-}" in
--build-only) mode=build; shift ;;
--run-only) mode=run; shift ;;
esac
B=${1:-build-gpu}
# Each test and benchmark runs under this limit (seconds), so one hang does
# not spend a lent machine's whole time.
T=${RK_GPU_TIMEOUT:-600}

json_str() { printf '%s' "$1" | tr '"\\\n' "''" | tr -d '\r'; }
emit() { # name result [detail]
    printf '{"suite":"gpu-check","name":"%s","result":"%s","detail":"%s"}\n' \
        "$1" "$2" "$(json_str "${3:-}")" | tee -a "$J"
}
# Runs a benchmark under the time limit; its JSON lines go to stdout and
# to $J. Returns the benchmark's exit status.
bench_json() {
    rcf=$(mktemp)
    { timeout "$T" "$@"; echo $? >"$rcf"; } | tee -a "$J"
    rc=$(cat "$rcf")
    rm -f "$rcf"
    return "$rc"
}

if [ "$mode" != run ]; then
    echo "gpu-check: building in $B" >&2
    cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DRK_BUILD_EXAMPLES=OFF \
        >&2 || exit 2
    cmake --build "$B" -j"$(nproc)" --target test_cuda_backend \
        test_cuda_direct test_cuda_nvrtc test_cuda_kcache test_cuda_loop_host \
        test_cuda_loop_lanes \
        test_cuda_k2k test_cuda_topics test_cuda_trap \
        test_cuda_pagerank test_cuda_anomaly test_backend_contract \
        fake_cuda bench_cuda \
        test_device_query test_buffer_states test_buffer_api \
        test_buffer_managed test_cuda_devices test_cuda_barrier \
        test_oneshot_devices test_cuda_peer test_pool_contract \
        test_pool_concurrent \
        bench_cuda_compile test_cuda_jitlink bench_cuda_numba \
        ringkernel_cli >&2 || exit 2
    # For an offline device machine that lacks them: the test and bench
    # binaries' non-system libraries go with the build (build-gpu/lib).
    mkdir -p "$B/lib"
    for bin in "$B"/tests/test_cuda_* "$B"/tests/test_backend_contract \
        "$B"/tests/test_oneshot_devices \
        "$B"/tests/test_device_query "$B"/tests/test_buffer_* \
        "$B"/tests/test_pool_* \
        "$B"/bench/bench_cuda* \
        "$B"/tools/ringkernel/ringkernel; do
        ldd "$bin" 2>/dev/null | awk '/cmocka|msgpack|microhttpd/ { print $3 }'
    done | sort -u | while read -r lib; do
        [ -n "$lib" ] && cp -L "$lib" "$B/lib/"
    done
    # The commit this build is of, stamped once here (a device machine
    # may get the tree without its .git): "-dirty" when tracked files
    # differ from it, so a result is never credited to code that did not
    # run.
    c=$(git rev-parse HEAD 2>/dev/null || echo unknown)
    if [ "$c" != unknown ] && ! git diff --quiet HEAD -- 2>/dev/null; then
        c="$c-dirty"
    fi
    echo "$c" >"$B/commit"
    [ "$mode" = build ] && exit 0
fi
export LD_LIBRARY_PATH="$PWD/$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

J=${RK_GPU_JSON:-bench/results/$(date -u +%Y-%m-%d-%H%M%S)-gpu-check.jsonl}
mkdir -p "$(dirname "$J")" || exit 2
: >"$J" || exit 2
echo "gpu-check: JSON lines to stdout and $J" >&2

emit date info "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
# The commit that was built (BUILD_DIR/commit, written at build time).
emit commit info "$(cat "$B/commit" 2>/dev/null || echo unknown)"
emit nvidia_smi info "$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -4)"

unset RK_CUDA_DRIVER # the real libcuda.so.1, never the stand-in
fail=0
run_test() { # name [env...]
    name=$1
    shift
    out=$(env "$@" timeout "$T" "$B/tests/$name" 2>&1)
    rc=$?
    printf '%s\n' "$out" >&2
    # On a GPU the cuda backend must run, not be skipped.
    # The device, buffer and pool tests print "no CUDA ..." when they skip
    # their CUDA paths.
    if printf '%s' "$out" | grep -q -E "backend 'cuda' skipped|no CUDA device|no CUDA:"; then
        rc=1
    fi
    if [ $rc -eq 0 ]; then
        emit "$name" pass "$(printf '%s' "$out" | grep -E "PASSED|SKIPPED|device:|^backend '" | tr '\n' ' ')"
    else
        emit "$name" fail "$(printf '%s' "$out" | grep -E 'FAILED|ERROR|LINE|skipped' | head -6 | tr '\n' ' ')"
        fail=1
    fi
}
run_test test_cuda_backend RK_TEST_CUDA_REAL=1
# The caller's own path (docs/cuda-data-path.md): a direct round trip costs no relay
# hand-off, order holds with the relay busy, a call racing a terminate.
run_test test_cuda_direct RK_TEST_CUDA_REAL=1
run_test test_cuda_nvrtc
run_test test_cuda_kcache
run_test test_cuda_loop_host
run_test test_cuda_loop_lanes
# Kernel-to-kernel on the device: rk_connect between two cuda kernels over
# K2K lanes in device memory (A -> B -> host, A -> B -> A);
# bench_cuda's cuda_k2k_rtt_p50 times it with %globaltimer.
run_test test_cuda_k2k RK_TEST_CUDA_REAL=1
# Device topics (docs/cuda-k2k.md): a publish reaches cuda subscribers on
# K2K lanes with no relay hand-off and cpu ones through the relay, once
# each; drop and block policies on a full lane (a few seconds).
run_test test_cuda_topics RK_TEST_CUDA_REAL=1
run_test test_cuda_pagerank
run_test test_cuda_anomaly
# Kernels on several devices (the two-device route skips on a one-GPU
# machine; the bad ordinal runs everywhere) and the named barrier shared
# by two resident kernels (its PTX, 50 rounds, the refusals a GPU shows).
run_test test_cuda_devices RK_TEST_CUDA_REAL=1
# Routes between two devices peer-to-peer where the driver allows it
# (docs/cuda-devices.md): the lane-scope PTX and the missing-device refusal
# run everywhere; the routes need two GPUs that reach each other and skip
# on a one-GPU machine.
run_test test_cuda_peer RK_TEST_CUDA_REAL=1
run_test test_cuda_barrier RK_TEST_CUDA_REAL=1
# One-shot kernels on a chosen device, and device memory of another
# library's wrapped without a copy (rk_buffer_wrap_device; with two GPUs
# the driver says whose memory a pointer is).
run_test test_oneshot_devices RK_TEST_CUDA_REAL=1
# A handler compiled by Numba (tests/data/numba_sample.ptx) linked into the
# persistent loop with nvJitLink and run on the GPU (it fails rather than
# skips there when NVRTC or nvJitLink is missing).
run_test test_cuda_jitlink RK_TEST_CUDA_REAL=1
# The backend contract suite: on a GPU the cuda backend runs its cases with
# their device twins (a "backend 'cuda' skipped" line means it did not).
run_test test_backend_contract
# The CUDA paths of device discovery, unified buffers (every state
# transition with its copies), managed buffers (prefetch, advice, the
# refusal beyond free memory) and the pinned and device pools.
for t in test_device_query test_buffer_states test_buffer_api \
    test_buffer_managed test_pool_contract test_pool_concurrent; do
    run_test "$t"
done
# A block that traps (__trap()) loses its process's context: both kernels
# end FAILED with the driver's error, the runtime is destroyed cleanly
# (each case in a process of its own; a few seconds).
run_test test_cuda_trap RK_TEST_CUDA_REAL=1

# Device code from Python (python/tests/test_cuda_python.py: one-shot
# kernels, ctx.execute_kernel, a device actor, the CUDA exports;
# test_cuda_devices_python.py: devices, managed buffers, other libraries'
# arrays, Numba's device arrays where numba-cuda is installed) on the
# real driver, where a Python with the package, numpy and pytest is at
# $RK_GPU_PYTHON (default build/pyvenv/bin/python, what `make pytest`
# makes); said to be skipped where there is none.
py=${RK_GPU_PYTHON:-build/pyvenv/bin/python}
if [ -x "$py" ] && "$py" -c "import ringkernel, numpy, pytest" 2>/dev/null; then
    out=$(RK_TEST_CUDA_REAL=1 timeout "$T" "$py" -m pytest -q -p no:cacheprovider \
        python/tests/test_cuda_python.py python/tests/test_cuda_devices_python.py 2>&1)
    rc=$?
    printf '%s\n' "$out" >&2
    if [ $rc -eq 0 ]; then
        emit test_cuda_python pass "$(printf '%s' "$out" | tail -1)"
    else
        emit test_cuda_python fail "$(printf '%s' "$out" | grep -E 'FAILED|Error' | head -6 | tr '\n' ' ')"
        fail=1
    fi
else
    emit test_cuda_python skipped "no Python with ringkernel, numpy and pytest at $py"
fi

# Benchmarks: bench_cuda prints impl "cuda" on a real GPU ("cuda_sim"
# would mean the stand-in was loaded: that is not a GPU figure). Its rows
# include the relayed round trip (cuda_rtt_*) and, in the same process,
# the caller's own path (cuda_direct_rtt_*, cuda_direct_send_rtt_*,
# cuda_direct_batched_throughput).
# Three runs: every figure is judged as a range over runs, each against
# the baselines (launch + sync, CUDA Graph launch) of the same process.
for run in 1 2 3; do
    emit bench_cuda_run info "$run"
    bench_json "$B/bench/bench_cuda" || fail=1
done
bench_json "$B/bench/bench_cuda_compile" || fail=1
# The Numba handler's round trip against the same handler in CUDA C, and
# each one's cold compile (+ link) and load (impl must be "cuda").
bench_json "$B/bench/bench_cuda_numba" || fail=1
# The PageRank sweep with its cuda configuration (tools/ringkernel/pr_dev.h):
# JSON lines on stdout (the table on stderr), every row checked against the
# host's power iteration to 1e-12; the cuda rows must say "config":"cuda"
# (never "cuda_sim") and the last line gives the CPU/GPU crossover.
# --backend cuda: exit status 3 if the backend is not usable here.
# The cuda rows also give the per-iteration device times (%globaltimer):
# iter_dev_median_s, iter_dev_max_s, iter_dev_max_over_median (issue 24's
# target: <= 1.2 in each of 5 runs at 10 M edges) and edges_per_s_iter_dev.
emit pagerank_run info "1: the sweep, 1k to 10M edges (the crossover of record)"
bench_json "$B/tools/ringkernel/ringkernel" bench pagerank --backend cuda \
    --json - || fail=1
# Runs 2 to 5 at 10 M edges alone (a few seconds each on a 16-core host:
# the graph, the three CPU configurations, the device kernel); their last
# lines judge the crossover at 10 M alone.
for run in 2 3 4 5; do
    emit pagerank_run info "$run (10M edges)"
    bench_json "$B/tools/ringkernel/ringkernel" bench pagerank \
        --backend cuda --sizes 10M --json - || fail=1
done
# The anomaly pipeline with its detector stage on the GPU
# (tools/ringkernel/anomaly_dev.h), three runs of two rounds each (as fast
# as it goes, then paced at 100k readings/s for 2 s): streaming rows with
# "config":"cuda" beside the CPU pipeline's, and per round a "transfer" row
# (h2d and d2h lane time, compute on %globaltimer, relay and queues) that
# measures the seeds' "transfer overhead 16-28 %". Exit 1 when a reading's
# verdict (or an alert's z-score) differs from the CPU pipeline's. About
# 15 s a run; each is cut at 120 s so a hang costs little of the machine.
T_all=$T
T=$((T < 120 ? T : 120))
for run in 1 2 3; do
    emit bench_anomaly_run info "$run"
    bench_json "$B/tools/ringkernel/ringkernel" bench anomaly \
        --backend cuda --readings 1M --json - || fail=1
done
T=$T_all
if ! grep -q '"mode":"transfer","config":"cuda",' "$J"; then
    emit bench_anomaly fail "no transfer row with config cuda"
    fail=1
fi
echo "gpu-check: results in $J" >&2
exit $fail
