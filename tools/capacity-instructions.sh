#!/usr/bin/env bash
# tools/capacity-instructions.sh - instructions (and callgrind's estimated
# cycles) per message on the queue paths at a capacity that is or is not a
# power of two, and on the runtime's send path (issue 27, items 1 and 3).
# Counts are exact: callgrind counts the instructions executed inside the
# named function (--toggle-collect), and the same run gives the same count.
#
#   tools/capacity-instructions.sh [BIN [LABEL [CASES [CAPS]]]]
#
# BIN: bench_capacity_cost (default build-bench/bench/bench_capacity_cost,
# `make bench` or `cmake --build build-bench --target bench_capacity_cost`
# builds it; Release, as every bench). LABEL goes into each row's "build"
# (e.g. a commit). CASES and CAPS: space-separated lists (defaults below).
# One JSON line per (case, capacity) on stdout:
#   {"suite":"capacity_cost","name":"instructions_per_msg","value":...,
#    "case":...,"capacity":...,"function":...,"est_cycles_per_msg":...}
# est_cycles is callgrind's cache-simulation estimate (Ir + 10 x L1 misses
# + 100 x LL misses), a model, not a measurement.
set -euo pipefail

BIN=${1:-build-bench/bench/bench_capacity_cost}
LABEL=${2:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
CASES=${3:-"send send_batch recv recv_batch block_full block_full_single drop_oldest rt_send rt_send_batch rt_recv"}
CAPS=${4:-"1000 1024 4000 4096"}
ROUNDS=${ROUNDS:-4}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# The function each case counts, and the functions not counted inside it
# (the wait for room: time, not work; it happens as often at every size).
fns() {
    local wait="--toggle-collect=rk__spin_wait --toggle-collect=rk__ec_wait --toggle-collect=rk_now_ns"
    case $1 in
    send) echo "lanes_send" ;;
    send_batch) echo "lanes_send_fill" ;;
    recv | recv_batch) echo "lanes_take lanes_release" ;;
    block_full) echo "lanes_send_fill $wait" ;;
    block_full_single) echo "lanes_send $wait" ;;
    drop_oldest) echo "mq_send" ;;
    rt_send) echo "rk_send" ;;
    rt_send_batch) echo "rk_send_batch" ;;
    rt_recv) echo "rk_ctx_recv" ;;
    *) echo "unknown case $1" >&2; exit 2 ;;
    esac
}

for c in $CASES; do
    for cap in $CAPS; do
        run=$c
        [ "$c" = rt_recv ] && run=rt_send # the same run's receives
        toggles=""
        for f in $(fns "$c"); do
            case $f in --*) toggles="$toggles $f" ;; *) toggles="$toggles --toggle-collect=$f" ;; esac
        done
        out="$TMP/cg.$c.$cap"
        # shellcheck disable=SC2086
        valgrind --tool=callgrind --collect-atstart=no $toggles \
            --cache-sim=yes --callgrind-out-file="$out" \
            "$BIN" "$run" "$cap" "$ROUNDS" >"$TMP/rows" 2>"$TMP/log" || {
            cat "$TMP/log" >&2
            exit 1
        }
        msgs=$(grep "\"case\":\"$c\"" "$TMP/rows" | sed 's/.*"value":\([0-9.]*\).*/\1/')
        calls=$(grep "\"case\":\"$c\"" "$TMP/rows" | sed 's/.*"calls":\([0-9]*\).*/\1/')
        events=$(grep '^events:' "$out" | cut -d' ' -f2-)
        totals=$(grep '^totals:' "$out" | cut -d' ' -f2-)
        fn=$(fns "$c" | awk '{print $1}')
        awk -v ev="$events" -v tot="$totals" -v c="$c" -v cap="$cap" \
            -v m="$msgs" -v calls="$calls" -v fn="$fn" -v label="$LABEL" '
        BEGIN {
            n = split(ev, e, " "); split(tot, t, " ")
            for (i = 1; i <= n; i++) v[e[i]] = t[i]
            l1 = v["I1mr"] + v["D1mr"] + v["D1mw"]
            ll = v["ILmr"] + v["DLmr"] + v["DLmw"]
            printf("{\"suite\":\"capacity_cost\",\"name\":\"instructions_per_msg\"," \
                "\"impl\":\"ringkernel\",\"value\":%.3f,\"unit\":\"instr/msg\"," \
                "\"case\":\"%s\",\"capacity\":%d,\"function\":\"%s\",\"build\":\"%s\"," \
                "\"messages\":%d,\"calls\":%d,\"instructions\":%d," \
                "\"est_cycles_per_msg\":%.3f,\"tool\":\"callgrind --toggle-collect\"}\n",
                v["Ir"] / m, c, cap, fn, label, m, calls, v["Ir"],
                (v["Ir"] + 10 * l1 + 100 * ll) / m)
        }'
    done
done
