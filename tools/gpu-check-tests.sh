# tools/gpu-check-tests.sh - the test stages of tools/gpu-check.sh (c and
# python), sourced by it: B, T, J, stages, stand_in, real and fail are
# its; emit, mark and has_stage its functions. Not run on its own.
# shellcheck shell=sh disable=SC2154,SC2034

# The C tests under --stand-in: the ones --stand-in builds (each C test
# also has its own *_cuda_sim ctest entry; this checks the script).
sim_tests="test_cuda_backend test_buffer_states"

run_test() { # name [env...]
    name=$1
    shift
    if [ "$stand_in" = 1 ]; then
        case " $sim_tests " in
        *" $name "*) ;;
        *) return 0 ;;
        esac
    fi
    # RK_TEST_CUDA_REAL=1 arguments are dropped under --stand-in.
    if [ -z "$real" ]; then
        # shellcheck disable=SC2046 # one word per VAR=value
        set -- $(printf '%s\n' "$@" | grep -v '^RK_TEST_CUDA_REAL=')
    fi
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
        [ $rc -eq 124 ] && out="timed out after $T s; $out"
        emit "$name" fail "$(printf '%s' "$out" | grep -E 'timed out|FAILED|ERROR|LINE|skipped' | head -6 | tr '\n' ' ')"
        fail=1
    fi
}

if has_stage c; then
    run_test test_cuda_backend RK_TEST_CUDA_REAL=1
    # The caller's own path (docs/cuda-data-path.md): a direct round trip
    # costs no relay hand-off, order holds with the relay busy, a call
    # racing a terminate.
    run_test test_cuda_direct RK_TEST_CUDA_REAL=1
    run_test test_cuda_nvrtc
    run_test test_cuda_kcache
    run_test test_cuda_loop_host
    run_test test_cuda_loop_lanes
    # Kernel-to-kernel on the device: rk_connect between two cuda kernels
    # over K2K lanes in device memory (A -> B -> host, A -> B -> A);
    # bench_cuda's cuda_k2k_rtt_p50 times it with %globaltimer.
    run_test test_cuda_k2k RK_TEST_CUDA_REAL=1
    # Device topics (docs/cuda-k2k.md): a publish reaches cuda subscribers
    # on K2K lanes with no relay hand-off and cpu ones through the relay,
    # once each; drop and block policies on a full lane (a few seconds).
    run_test test_cuda_topics RK_TEST_CUDA_REAL=1
    run_test test_cuda_pagerank
    run_test test_cuda_anomaly
    # Kernels on several devices (the two-device route skips on a one-GPU
    # machine; the bad ordinal runs everywhere) and the named barrier
    # shared by two resident kernels (its PTX, 50 rounds, the refusals a
    # GPU shows).
    run_test test_cuda_devices RK_TEST_CUDA_REAL=1
    # Routes between two devices peer-to-peer where the driver allows it
    # (docs/cuda-devices.md): the lane-scope PTX and the missing-device
    # refusal run everywhere; the routes need two GPUs that reach each
    # other and skip on a one-GPU machine.
    run_test test_cuda_peer RK_TEST_CUDA_REAL=1
    run_test test_cuda_barrier RK_TEST_CUDA_REAL=1
    # One-shot kernels on a chosen device, and device memory of another
    # library's wrapped without a copy (rk_buffer_wrap_device; with two
    # GPUs the driver says whose memory a pointer is).
    run_test test_oneshot_devices RK_TEST_CUDA_REAL=1
    # A handler compiled by Numba (tests/data/numba_sample.ptx) linked into
    # the persistent loop with nvJitLink and run on the GPU (it fails rather
    # than skips there when NVRTC or nvJitLink is missing).
    run_test test_cuda_jitlink RK_TEST_CUDA_REAL=1
    # The backend contract suite: on a GPU the cuda backend runs its cases
    # with their device twins (a "backend 'cuda' skipped" line means it did
    # not).
    run_test test_backend_contract
    # The CUDA paths of device discovery, unified buffers (every state
    # transition with its copies), managed buffers (prefetch, advice, the
    # refusal beyond free memory) and the pinned and device pools.
    for t in test_device_query test_buffer_states test_buffer_api \
        test_buffer_managed test_pool_contract test_pool_concurrent; do
        run_test "$t"
    done
    # A block that traps (__trap()) loses its process's context: both
    # kernels end FAILED with the driver's error, the runtime is destroyed
    # cleanly (each case in a process of its own; a few seconds).
    run_test test_cuda_trap RK_TEST_CUDA_REAL=1
    stage_done c
fi

# The Python to run the device tests with, on stdout; the reason there is
# none on stderr (exit 1: a dependency is missing; 2: the package's build
# failed). RK_GPU_PYTHON if it has the package, numpy and pytest; else
# (not under --stand-in) build/pyvenv's, what `make pytest` makes on a
# development machine; else the package built here, offline, with the
# machine's own python3 ($PYTHON), into BUILD_DIR/pyenv: a virtual
# environment with no pip of its own whose .pth file adds python3's
# site-packages (and so their .pth files), so numpy, pytest, Numba and
# CuPy are the machine's, and the tests' children (sys.executable, with
# PYTHONPATH replaced) find the package too. Its CMake build runs in
# BUILD_DIR/pybuild with BUILD_DIR/pydev's msgpack-c and pkg-config where
# --build-only staged them.
gpu_python() {
    usable='import ringkernel, numpy, pytest'
    if [ -n "${RK_GPU_PYTHON:-}" ]; then
        if "$RK_GPU_PYTHON" -c "$usable" 2>/dev/null; then
            echo "$RK_GPU_PYTHON"
            return 0
        fi
        echo "RK_GPU_PYTHON=$RK_GPU_PYTHON cannot import ringkernel, numpy and pytest" >&2
        return 1
    fi
    if [ "$stand_in" = 0 ] && build/pyvenv/bin/python -c "$usable" 2>/dev/null; then
        echo build/pyvenv/bin/python
        return 0
    fi
    hp=${PYTHON:-python3}
    # What the build and the tests import (pyproject.toml: numpy and
    # msgpack at run time; scikit-build-core, CMake and ninja to build;
    # pytest); each is in the device machines' image (KINDS.md).
    missing=$("$hp" -c '
import importlib.util, shutil, sys, sysconfig, os
need = {"numpy": "numpy", "msgpack": "msgpack", "pytest": "pytest",
        "scikit_build_core": "scikit-build-core", "pip": "pip", "venv": "venv"}
miss = [n for m, n in need.items() if importlib.util.find_spec(m) is None]
if importlib.util.find_spec("cmake") is None and not shutil.which("cmake"):
    miss.append("cmake")
if not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")):
    miss.append("Python.h")
print(" ".join(miss))' 2>&1) || missing="a working $hp ($missing)"
    command -v cc >/dev/null 2>&1 || missing="$missing cc"
    if [ -n "$missing" ]; then
        echo "$hp lacks: $missing" >&2
        return 1
    fi
    venv=$B/pyenv
    rm -rf "$venv"
    if ! err=$("$hp" -m venv --without-pip "$venv" 2>&1); then
        echo "$hp -m venv failed: $err" >&2
        return 1
    fi
    if ! site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') ||
        ! "$hp" -c 'import sys
d = [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
print("import site; list(map(site.addsitedir, %r))" % d)' \
            >"$site/rk-host-site.pth"; then
        echo "no site-packages in $venv" >&2
        return 1
    fi
    pd=$PWD/$B/pydev
    echo "gpu-check: building the Python package with $hp ($("$hp" -c 'import sys; print(sys.version.split()[0])'))" >&2
    # Offline: no index, no build isolation (the machine's
    # scikit-build-core, CMake and ninja), no dependencies fetched.
    if [ -x "$pd/bin/pkg-config" ]; then
        set -- env PATH="$pd/bin:$PATH" PKG_CONFIG_LIBDIR="$pd/lib/pkgconfig" PKG_CONFIG_PATH=
    else
        set -- env
    fi
    if ! err=$("$@" timeout 300 "$hp" -m pip install -q --no-index \
        --no-build-isolation --no-deps --no-cache-dir --no-compile --upgrade \
        --target "$site" --config-settings=build-dir="$PWD/$B/pybuild/{wheel_tag}" \
        . 2>&1); then
        printf '%s\n' "$err" >&2
        echo "pip install of the package failed: $(printf '%s' "$err" | grep -i -E 'error|not found|could not' | head -3 | tr '\n' ' ')" >&2
        return 2
    fi
    echo "$venv/bin/python"
}

# Device code from Python (python/tests/test_cuda_python.py: one-shot
# kernels, ctx.execute_kernel, a device actor, the CUDA exports;
# test_cuda_devices_python.py: devices, managed buffers, other libraries'
# arrays (CuPy), Numba's device arrays where numba-cuda is installed) on
# the real driver (under --stand-in on the stand-in).
if has_stage python; then
    errf=$(mktemp)
    py=$(gpu_python 2>"$errf")
    pyrc=$?
    if [ $pyrc -eq 0 ]; then
        cat "$errf" >&2
        emit python info "$py: $("$py" -c 'import sys, ringkernel; print(sys.version.split()[0], ringkernel.__file__)' 2>&1)"
        # 300 s: the package's build is done; each case runs in a child of
        # its own (under 300 s each, the tests' own limit).
        # shellcheck disable=SC2086 # $real is empty or one word
        out=$(env $real timeout "${RK_GPU_TIMEOUT_PY:-300}" \
            "$py" -m pytest -q -rfs -p no:cacheprovider -W ignore::pytest.PytestConfigWarning \
            python/tests/test_cuda_python.py python/tests/test_cuda_devices_python.py 2>&1)
        rc=$?
        # The whole pytest output also beside the JSON file (a lent
        # machine returns files, and only the tail of its output).
        printf '%s\n' "$out" | tee "${J%.jsonl}-python.log" >&2
        summary=$(printf '%s' "$out" | tail -1)
        if [ $rc -eq 0 ]; then
            emit test_cuda_python pass "$summary; $(printf '%s' "$out" | grep -E '^SKIPPED' | head -4 | tr '\n' ' ')"
        else
            [ $rc -eq 124 ] && summary="timed out after ${RK_GPU_TIMEOUT_PY:-300} s"
            emit test_cuda_python fail "$summary; $(printf '%s' "$out" | grep -E '^FAILED' | head -6 | cut -c1-160 | tr '\n' ' ')"
            fail=1
        fi
    elif [ $pyrc -eq 2 ]; then
        cat "$errf" >&2
        emit test_cuda_python fail "$(tail -1 "$errf")"
        fail=1
    else
        cat "$errf" >&2
        # The self-check exists to prove this flow: there a skip fails.
        if [ "$stand_in" = 1 ]; then
            emit test_cuda_python fail "$(tail -1 "$errf")"
            fail=1
        else
            emit test_cuda_python skipped "$(tail -1 "$errf")"
        fi
    fi
    rm -f "$errf"
    stage_done python
fi
