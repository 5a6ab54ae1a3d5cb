// bench/bench_caf.cpp - the C++ Actor Framework reference for the runtime
// benchmarks (suite "runtime", impl "caf").
//
// Built against Debian's libcaf-dev 0.17.6 (classic 0.17 API: atom_constant,
// event_based_actor behaviours, scoped_actor). Configuration, kept close to
// what the ringkernel runtime gets on the same machine:
//   scheduler.max-threads = 2   (2 worker threads; the machine has 2 cores)
//   scheduler.policy      = stealing (CAF's default work-stealing scheduler)
//   everything else at CAF's defaults (max-throughput unlimited, no I/O
//   module, no logging).
//
// Results, one JSON line each (the format of bench/bench.h):
//   pingpong_rtt_p50 / _p99 / _mean   two actors bouncing one message; a
//                                     round trip is ping -> pong -> ping,
//                                     timed inside the ping actor (ns)
//   oneway_throughput                 a producer actor sends N messages
//                                     (an atom and a uint64_t each) to a
//                                     consumer actor that counts them;
//                                     first send to last receive (msgs/s)
// RK_BENCH_SCALE scales the iteration counts.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "caf/all.hpp"

#include "bench.h"

using namespace caf;

namespace
{

using ping_atom = atom_constant<atom("ping")>;
using pong_atom = atom_constant<atom("pong")>;
using start_atom = atom_constant<atom("start")>;
using done_atom = atom_constant<atom("done")>;
using data_atom = atom_constant<atom("data")>;
using more_atom = atom_constant<atom("more")>;

// ------------------------------------------------------------- ping-pong

behavior
pong_actor(event_based_actor *)
{
    // The returned message is the reply to the sender.
    return {
        [](ping_atom, uint64_t i) {
            return make_message(pong_atom::value, i);
        },
    };
}

struct ping_state {
    uint64_t t0 = 0;
};

behavior
ping_actor(stateful_actor<ping_state> *self, actor pong, uint64_t n,
    std::vector<uint64_t> *rtts, actor done_to)
{
    return {
        [=](start_atom) {
            self->state.t0 = bench_now_ns();
            self->send(pong, ping_atom::value, uint64_t { 0 });
        },
        [=](pong_atom, uint64_t i) {
            uint64_t t = bench_now_ns();
            rtts->push_back(t - self->state.t0);
            if (i + 1 >= n) {
                self->send(done_to, done_atom::value);
                self->quit();
                return;
            }
            self->state.t0 = bench_now_ns();
            self->send(pong, ping_atom::value, i + 1);
        },
    };
}

// Runs n round trips and returns their times (ns).
std::vector<uint64_t>
run_pingpong(actor_system &sys, uint64_t n)
{
    std::vector<uint64_t> rtts;
    rtts.reserve(n);
    scoped_actor self { sys };
    auto pong = sys.spawn(pong_actor);
    auto ping = sys.spawn(ping_actor, pong, n, &rtts, actor { self });
    self->send(ping, start_atom::value);
    self->receive([](done_atom) {});
    anon_send_exit(pong, exit_reason::user_shutdown);
    return rtts;
}

// ------------------------------------------------------------- one-way

struct consumer_state {
    uint64_t count = 0;
};

behavior
consumer_actor(stateful_actor<consumer_state> *self, uint64_t n,
    uint64_t *t_last, actor done_to)
{
    return {
        [=](data_atom, uint64_t) {
            if (++self->state.count == n) {
                *t_last = bench_now_ns();
                self->send(done_to, done_atom::value);
                self->quit();
            }
        },
    };
}

// Sends in chunks and re-schedules itself between chunks, so that it does
// not hold a worker thread for the whole run.
behavior
producer_actor(event_based_actor *self, actor consumer, uint64_t n)
{
    const uint64_t chunk = 1024;
    return {
        [=](more_atom, uint64_t sent) {
            uint64_t end = std::min(n, sent + chunk);
            for (uint64_t i = sent; i < end; i++)
                self->send(consumer, data_atom::value, i);
            if (end < n)
                self->send(self, more_atom::value, end);
            else
                self->quit();
        },
    };
}

double
run_oneway(actor_system &sys, uint64_t n)
{
    uint64_t t_last = 0;
    scoped_actor self { sys };
    auto consumer = sys.spawn(consumer_actor, n, &t_last, actor { self });
    auto producer = sys.spawn(producer_actor, consumer, n);
    uint64_t t0 = bench_now_ns();
    self->send(producer, more_atom::value, uint64_t { 0 });
    self->receive([](done_atom) {});
    return (double)n * 1e9 / (double)(t_last - t0);
}

} // namespace

int
main()
{
    double scale = bench_scale();
    uint64_t n_rtt = std::max<uint64_t>(1000, (uint64_t)(200000 * scale));
    uint64_t n_oneway = std::max<uint64_t>(10000, (uint64_t)(2000000 * scale));

    actor_system_config cfg;
    cfg.set("scheduler.max-threads", size_t { 2 });
    actor_system sys { cfg };

    const char *extra = "\"threads\":2,\"caf\":\"0.17.6\"";

    run_pingpong(sys, 1000); // warm-up: spawn paths, caches, thread wake-ups
    std::vector<uint64_t> rtts = run_pingpong(sys, n_rtt);
    double mean = 0;
    for (uint64_t v : rtts)
        mean += (double)v;
    mean /= (double)rtts.size();
    std::string ex = std::string(extra) + ",\"n\":" + std::to_string(n_rtt);
    bench_emit("runtime", "pingpong_rtt_p50", "caf",
        (double)bench_percentile(rtts.data(), rtts.size(), 50.0), "ns",
        ex.c_str());
    bench_emit("runtime", "pingpong_rtt_p99", "caf",
        (double)bench_percentile(rtts.data(), rtts.size(), 99.0), "ns",
        ex.c_str());
    bench_emit("runtime", "pingpong_rtt_mean", "caf", mean, "ns", ex.c_str());

    run_oneway(sys, 10000); // warm-up
    double rate = run_oneway(sys, n_oneway);
    ex = std::string(extra) + ",\"n\":" + std::to_string(n_oneway);
    bench_emit(
        "runtime", "oneway_throughput", "caf", rate, "msgs/s", ex.c_str());
    return 0;
}
