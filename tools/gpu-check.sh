#!/bin/sh
# tools/gpu-check.sh - what to run on a machine with an NVIDIA GPU.
#
# Builds the CUDA tests and benchmarks (unless --run-only and the build
# directory already exists, e.g. carried to an offline device machine),
# runs the CUDA tests against the REAL driver (no stand-in), then the
# Python package's device tests, then the benchmarks (bench_cuda,
# bench_cuda_compile, bench_cuda_numba,
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
# benchmark that ran passed.
#
#   tools/gpu-check.sh [--build-only | --run-only] [--stand-in]
#                      [--quick | --stages=LIST] [BUILD_DIR]
#
# Stages (--stages=, comma-separated; default all of them), with what each
# cost on 2 shared cores under the stand-in and the estimate for a 16-core
# device machine (docs/cuda-robustness.md, "What ran on a GPU"):
#   c        the C tests on the real driver      (201 s here; 1.5-3 min)
#   python   builds the Python package with the machine's python3, offline,
#            and runs python/tests/test_cuda_python.py and
#            test_cuda_devices_python.py on the real driver, pytest's
#            whole output in $RK_GPU_JSON less .jsonl, plus -python.log
#            (60 s here; ~1 min)
#   bench    bench_cuda (3 runs), bench_cuda_compile, bench_cuda_numba
#                                                (2-4 min)
#   pagerank `ringkernel bench pagerank --backend cuda`, 5 runs (1-2 min)
#   anomaly  `ringkernel bench anomaly --backend cuda`, 3 runs (~45 s)
# --quick is --stages=c,python. Each test and benchmark runs under
# $RK_GPU_TIMEOUT seconds (default 120; the Python stage
# $RK_GPU_TIMEOUT_PY, 300, and the PageRank sweep $RK_GPU_TIMEOUT_SWEEP,
# 300), so one hang costs little. A stage_NAME row closes each stage
# with the seconds since the run began.
#
# On a lent device machine (no network, no cmocka or msgpack-c headers,
# python3 3.12 that is not this machine's; /work/.library/device), 15
# minutes of device time in all, at most 10 a call, warm 30 s after one:
#   here:  tools/gpu-check.sh --build-only        (build-gpu, ~22 MB: the
#          binaries, BUILD_DIR/lib with their libraries, BUILD_DIR/pydev
#          with msgpack-c's headers and a pkg-config the Python build needs)
#   call 1 (carry ["build-gpu"], timeout_s 540; expect 3-5 min):
#          RK_GPU_JSON=$OUT/tests.jsonl tools/gpu-check.sh --run-only --quick
#   call 2 at once, on the same warm machine (carry ["build-gpu"],
#          timeout_s what is left less a minute; expect 4-6 min):
#          RK_GPU_JSON=$OUT/bench.jsonl tools/gpu-check.sh --run-only \
#              --stages=bench,pagerank,anomaly
#
# --stand-in runs the same flow with no GPU against the stand-in driver
# (BUILD_DIR/tests/libfake_cuda.so; default BUILD_DIR build-gpu-sim): a
# small subset of the C tests, the Python stage and one short benchmark
# run, every row marked "stand_in":true (the benchmarks' say cuda_sim):
# nothing it prints is a GPU figure. `make gpucheck-selftest` runs it.
#
# BUILD_DIR defaults to build-gpu (carry it with the working tree to an
# offline device machine: --build-only here, --run-only there; the
# libraries the tests need beyond the base system travel in
# BUILD_DIR/lib). docs/benchmarks.md ("CUDA") says what each figure
# means and holds the figures of record; a run that backs one keeps its
# JSON file in bench/results/.
set -u
cd "$(dirname "$0")/.." || exit 2

mode=all
stand_in=0
all_stages=c,python,bench,pagerank,anomaly
stages=
B=
while [ $# -gt 0 ]; do
    case "$1" in
    --build-only) mode=build ;;
    --run-only) mode=run ;;
    --stand-in) stand_in=1 ;;
    --quick) stages=c,python ;;
    --stages=*) stages=${1#--stages=} ;;
    -h | --help)
        sed -n '2,/^set -u/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2
        exit 0
        ;;
    -*)
        echo "gpu-check: unknown option $1 (--help)" >&2
        exit 2
        ;;
    *) B=$1 ;;
    esac
    shift
done
for s in $(echo "${stages:-$all_stages}" | tr ',' ' '); do
    case ",$all_stages," in
    *",$s,"*) ;;
    *)
        echo "gpu-check: unknown stage '$s' (stages: $all_stages)" >&2
        exit 2
        ;;
    esac
done
if [ "$stand_in" = 1 ]; then
    B=${B:-build-gpu-sim}
    # No GPU: the benchmarks once, short; PageRank and anomaly have their
    # own stand-in ctest entries (cli_*_cuda_sim).
    stages=${stages:-c,python,bench}
    case ",$stages," in
    *,pagerank,* | *,anomaly,*)
        echo "gpu-check: --stand-in runs the stages c, python and bench" \
            "(ctest's cli_*_cuda_sim entries run PageRank and anomaly)" >&2
        exit 2
        ;;
    esac
else
    B=${B:-build-gpu}
    stages=${stages:-$all_stages}
fi
has_stage() { case ",$stages," in *",$1,"*) return 0 ;; esac; return 1; }
# Each test and benchmark runs under this limit (seconds), so one hang does
# not spend a lent machine's whole time.
T=${RK_GPU_TIMEOUT:-120}

json_str() { printf '%s' "$1" | tr '"\\\n' "''" | tr -d '\r'; }
# Under --stand-in every row says so, the benchmarks' own rows too.
if [ "$stand_in" = 1 ]; then
    mark() { sed -u 's/^{/{"stand_in":true,/'; }
else
    mark() { cat; }
fi
emit() { # name result [detail]
    printf '{"suite":"gpu-check","name":"%s","result":"%s","detail":"%s"}\n' \
        "$1" "$2" "$(json_str "${3:-}")" | mark | tee -a "$J"
}
# Runs a benchmark under the time limit; its JSON lines go to stdout and
# to $J. Returns the benchmark's exit status.
bench_json() {
    rcf=$(mktemp)
    { timeout "$T" "$@"; echo $? >"$rcf"; } | mark | tee -a "$J"
    rc=$(cat "$rcf")
    rm -f "$rcf"
    return "$rc"
}

# BUILD_DIR/pydev: what building the Python package needs beyond python3,
# CMake and a C compiler, for a machine without msgpack-c's development
# files (the device machines): its C headers, libmsgpackc, a msgpack.pc
# relative to itself, and this machine's pkg-config (pkgconf) with its
# library behind a wrapper. Everything is written under BUILD_DIR/pydev.
stage_pydev() {
    [ -n "$B" ] || return 1
    pd=$B/pydev
    rm -rf "$pd"
    mkdir -p "$pd/include" "$pd/lib/pkgconfig" "$pd/bin" || return 1
    inc=$(pkg-config --variable=includedir msgpack) || return 1
    (cd "$inc" && find msgpack.h msgpack -name '*.h' | tar -cf - -T -) |
        tar -xf - -C "$pd/include" || return 1
    so=$(cc -print-file-name=libmsgpackc.so)
    [ -f "$so" ] || return 1
    cp -L "$so" "$pd/lib/libmsgpackc.so" || return 1
    soname=$(objdump -p "$so" | awk '/SONAME/ { print $2 }')
    if [ -n "$soname" ]; then cp -L "$so" "$pd/lib/$soname" || return 1; fi
    # shellcheck disable=SC2016 # pkg-config's variables, not the shell's
    {
        printf '%s\n' 'prefix=${pcfiledir}/../..' 'libdir=${prefix}/lib' \
            'includedir=${prefix}/include' '' 'Name: MessagePack' \
            'Description: msgpack-c, staged by tools/gpu-check.sh'
        printf 'Version: %s\n' "$(pkg-config --modversion msgpack)"
        printf '%s\n' 'Libs: -L${libdir} -lmsgpackc' 'Cflags: -I${includedir}'
    } >"$pd/lib/pkgconfig/msgpack.pc" || return 1
    pc=$(command -v pkg-config) || return 1
    cp -L "$pc" "$pd/bin/pkgconf" || return 1
    for lib in $(ldd "$pd/bin/pkgconf" | awk '/pkgconf/ { print $3 }'); do
        cp -L "$lib" "$pd/lib/" || return 1
    done
    # shellcheck disable=SC2016 # the wrapper's own variables
    printf '%s\n' '#!/bin/sh' 'd=$(cd "$(dirname "$0")" && pwd)' \
        'LD_LIBRARY_PATH="$d/../lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$d/pkgconf" "$@"' \
        >"$pd/bin/pkg-config" || return 1
    chmod +x "$pd/bin/pkg-config" || return 1
    PKG_CONFIG_LIBDIR=$pd/lib/pkgconfig "$pd/bin/pkg-config" --exists msgpack
}

if [ "$mode" != run ]; then
    echo "gpu-check: building in $B" >&2
    cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DRK_BUILD_EXAMPLES=OFF \
        >&2 || exit 2
    if [ "$stand_in" = 1 ]; then
        # The self-check's subset: the stand-in, two C tests and one
        # benchmark (every C test has its own *_cuda_sim ctest entry).
        targets="fake_cuda test_cuda_backend test_buffer_states bench_cuda"
    else
        targets="test_cuda_backend test_cuda_direct test_cuda_nvrtc
            test_cuda_kcache test_cuda_loop_host test_cuda_loop_lanes
            test_cuda_k2k test_cuda_topics test_cuda_trap
            test_cuda_pagerank test_cuda_anomaly test_backend_contract
            fake_cuda bench_cuda test_device_query test_buffer_states
            test_buffer_api test_buffer_managed test_cuda_devices
            test_cuda_barrier test_oneshot_devices test_cuda_peer
            test_pool_contract test_pool_concurrent bench_cuda_compile
            test_cuda_jitlink bench_cuda_numba ringkernel_cli"
    fi
    # JOBS: make's convention (the development machine has 2 cores).
    # shellcheck disable=SC2086 # one word per target
    cmake --build "$B" -j"${JOBS:-$(nproc)}" --target $targets >&2 || exit 2
    # The Python stage's virtual environment and CMake build are made on
    # the machine that runs it (its python3): none of this machine's goes
    # with a carried build.
    rm -rf "$B/pyenv" "$B/pybuild"
    if ! stage_pydev; then
        echo "gpu-check: could not stage msgpack-c for the Python build" \
            "(pkg-config msgpack, cc, objdump): the python stage will need" \
            "the device machine's own" >&2
        rm -rf "$B/pydev"
    fi
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

if [ "$stand_in" = 1 ]; then
    # Kept beside the build, never in bench/results: not a GPU figure.
    J=${RK_GPU_JSON:-$B/gpu-check-stand-in.jsonl}
else
    J=${RK_GPU_JSON:-bench/results/$(date -u +%Y-%m-%d-%H%M%S)-gpu-check.jsonl}
fi
mkdir -p "$(dirname "$J")" || exit 2
: >"$J" || exit 2
echo "gpu-check: stages $stages; JSON lines to stdout and $J" >&2

emit date info "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
# The commit that was built (BUILD_DIR/commit, written at build time).
emit commit info "$(cat "$B/commit" 2>/dev/null || echo unknown)"
fail=0
if [ "$stand_in" = 1 ]; then
    # The stand-in driver, for the C tests (RK_CUDA_DRIVER) and the
    # Python ones' children (RK_TEST_FAKE_CUDA); no test is told
    # RK_TEST_CUDA_REAL, so each runs its stand-in configuration.
    fake=$PWD/$B/tests/libfake_cuda.so
    if [ ! -f "$fake" ]; then
        emit stand_in fail "no $fake (build without --run-only first)"
        exit 1
    fi
    export RK_CUDA_DRIVER="$fake" RK_TEST_FAKE_CUDA="$fake"
    emit stand_in info "no GPU: the stand-in driver $fake; impl cuda_sim, not GPU figures"
    real=
else
    emit nvidia_smi info "$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -4)"
    unset RK_CUDA_DRIVER # the real libcuda.so.1, never the stand-in
    # The lent machines keep NVRTC and nvJitLink in the toolkit's folder,
    # off the loader's path (docs/cuda.md, "On a GPU").
    if [ -d /usr/local/cuda/lib64 ]; then
        LD_LIBRARY_PATH=$LD_LIBRARY_PATH:/usr/local/cuda/lib64
    fi
    real=RK_TEST_CUDA_REAL=1
fi
# Seconds since the run began, on each stage's closing row.
t0=$(date +%s)
stage_done() { emit "stage_$1" info "done at $(($(date +%s) - t0)) s"; }

# shellcheck source=tools/gpu-check-tests.sh
. tools/gpu-check-tests.sh

# Benchmarks: bench_cuda prints impl "cuda" on a real GPU ("cuda_sim"
# would mean the stand-in was loaded: that is not a GPU figure). Its rows
# include the relayed round trip (cuda_rtt_*) and, in the same process,
# the caller's own path (cuda_direct_rtt_*, cuda_direct_send_rtt_*,
# cuda_direct_batched_throughput).
# Three runs: every figure is judged as a range over runs, each against
# the baselines (launch + sync, CUDA Graph launch) of the same process.
# Under --stand-in one run at a hundredth of the scale (a smoke test).
if has_stage bench; then
    if [ "$stand_in" = 1 ]; then
        emit bench_cuda_run info "1 (stand-in, RK_BENCH_SCALE=0.01)"
        RK_BENCH_SCALE=0.01 bench_json "$B/bench/bench_cuda" || fail=1
    else
        for run in 1 2 3; do
            emit bench_cuda_run info "$run"
            bench_json "$B/bench/bench_cuda" || fail=1
        done
        bench_json "$B/bench/bench_cuda_compile" || fail=1
        # The Numba handler's round trip against the same handler in CUDA
        # C, and each one's cold compile (+ link) and load (impl must be
        # "cuda").
        bench_json "$B/bench/bench_cuda_numba" || fail=1
    fi
    stage_done bench
fi
# The PageRank sweep with its cuda configuration (tools/ringkernel/pr_dev.h):
# JSON lines on stdout (the table on stderr), every row checked against the
# host's power iteration to 1e-12; the cuda rows must say "config":"cuda"
# (never "cuda_sim") and the last line gives the CPU/GPU crossover.
# --backend cuda: exit status 3 if the backend is not usable here.
# The cuda rows also give the per-iteration device times (%globaltimer):
# iter_dev_median_s, iter_dev_max_s, iter_dev_max_over_median (issue 24's
# target: <= 1.2 in each of 5 runs at 10 M edges) and edges_per_s_iter_dev.
if has_stage pagerank; then
    # The sweep builds graphs up to 10 M edges and runs three CPU
    # configurations beside the device: it gets 300 s.
    T_all=$T
    T=${RK_GPU_TIMEOUT_SWEEP:-300}
    emit pagerank_run info "1: the sweep, 1k to 10M edges (the crossover of record)"
    bench_json "$B/tools/ringkernel/ringkernel" bench pagerank --backend cuda \
        --json - || fail=1
    T=$T_all
    # Runs 2 to 5 at 10 M edges alone (a few seconds each on a 16-core host:
    # the graph, the three CPU configurations, the device kernel); their last
    # lines judge the crossover at 10 M alone.
    for run in 2 3 4 5; do
        emit pagerank_run info "$run (10M edges)"
        bench_json "$B/tools/ringkernel/ringkernel" bench pagerank \
            --backend cuda --sizes 10M --json - || fail=1
    done
    stage_done pagerank
fi
# The anomaly pipeline with its detector stage on the GPU
# (tools/ringkernel/anomaly_dev.h), three runs of two rounds each (as fast
# as it goes, then paced at 100k readings/s for 2 s): streaming rows with
# "config":"cuda" beside the CPU pipeline's, and per round a "transfer" row
# (h2d and d2h lane time, compute on %globaltimer, relay and queues) that
# measures the seeds' "transfer overhead 16-28 %". Exit 1 when a reading's
# verdict (or an alert's z-score) differs from the CPU pipeline's. About
# 15 s a run; each is cut at $T (120 s) so a hang costs little.
if has_stage anomaly; then
    for run in 1 2 3; do
        emit bench_anomaly_run info "$run"
        bench_json "$B/tools/ringkernel/ringkernel" bench anomaly \
            --backend cuda --readings 1M --json - || fail=1
    done
    if ! grep -q '"mode":"transfer","config":"cuda",' "$J"; then
        emit bench_anomaly fail "no transfer row with config cuda"
        fail=1
    fi
    stage_done anomaly
fi
emit gpu_check "$([ $fail = 0 ] && echo pass || echo fail)" \
    "stages $stages in $(($(date +%s) - t0)) s"
echo "gpu-check: results in $J" >&2
exit $fail
