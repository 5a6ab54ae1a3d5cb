/*
 * bench/bench_msg.c - suite "message": msgpack encode/decode of 64-byte,
 * 256-byte and 1 KiB messages (field data size; the encoded frame adds the
 * envelope keys, reported as "frame_bytes"), a 256-byte message with a
 * string and a heap array, the fixed-layout slot copy, and id generation.
 *
 * Each figure is the median over REPS batches of the mean ns per call.
 */
#include <msgpack.h>
#include <string.h>

#include "../tests/support/msg_test_types.c"
#include "bench.h"
#include "ringkernel/ringkernel.h"

#define REPS 15

static volatile uint64_t sink;
static unsigned char frame[8192];
static unsigned char slot[2048];

typedef void (*bench_fn)(void *arg);

static double
measure(bench_fn fn, void *arg, size_t iters)
{
    uint64_t v[REPS];

    for (size_t i = 0; i < iters / 10 + 1; i++) /* warm up */
        fn(arg);
    for (int r = 0; r < REPS; r++) {
        uint64_t t0 = bench_now_ns();

        for (size_t i = 0; i < iters; i++)
            fn(arg);
        v[r] = (bench_now_ns() - t0) * 1000 / iters; /* ps per call */
    }
    return (double)bench_percentile(v, REPS, 50) / 1000.0;
}

struct codec_case {
    const rk_msgtype *t;
    void *obj;
    void *out;
    rk_msg_header h;
    size_t len;
};

static void
do_encode(void *arg)
{
    struct codec_case *c = arg;
    size_t len;

    rk_msg_encode(c->t, &c->h, c->obj, frame, sizeof(frame), &len);
    sink += len;
}

static void
do_decode(void *arg)
{
    struct codec_case *c = arg;

    rk_msg_decode(c->t, frame, c->len, c->out, NULL, 0);
    sink += *(const uint64_t *)c->out;
    rk_msg_free(c->t, c->out);
}

static void
do_roundtrip(void *arg)
{
    struct codec_case *c = arg;
    size_t len;

    rk_msg_encode(c->t, &c->h, c->obj, frame, sizeof(frame), &len);
    rk_msg_decode(c->t, frame, len, c->out, NULL, 0);
    sink += *(const uint64_t *)c->out;
    rk_msg_free(c->t, c->out);
}

/* For comparison: msgpack-c's stock msgpack_unpack() building its object
 * tree of the same frame in a reused zone (no field matching, no copies).
 * rk_msg_decode runs the same parser template with its own callbacks. */
static void
do_unpack_only(void *arg)
{
    struct codec_case *c = arg;
    static msgpack_zone *z;
    msgpack_object o;
    size_t off = 0;

    if (z == NULL)
        z = msgpack_zone_new(MSGPACK_ZONE_CHUNK_SIZE);
    msgpack_unpack((const char *)frame, c->len, &off, z, &o);
    sink += o.via.map.size;
    msgpack_zone_clear(z);
}

static void
do_fixed_write(void *arg)
{
    struct codec_case *c = arg;

    rk_msg_fixed_write(c->t, c->obj, slot, sizeof(slot));
    sink += slot[0];
}

static void
do_fixed_read(void *arg)
{
    struct codec_case *c = arg;

    rk_msg_fixed_read(c->t, slot, c->t->fixed_size, c->out);
    sink += *(const uint64_t *)c->out;
}

static void
do_uuid(void *arg)
{
    rk_uuid u = rk_uuid_v7();

    (void)arg;
    sink += u.b[15];
}

static void
do_header(void *arg)
{
    rk_msg_header h;

    (void)arg;
    rk_msg_header_init(&h, 1, 128);
    sink += h.message_id.b[15];
}

/* `bench_msg NAME` runs only the case NAME (e.g. for callgrind). */
static const char *only;

static void
run_case(const char *name, struct codec_case *c, size_t iters)
{
    char extra[64];

    if (only != NULL && strcmp(only, name) != 0)
        return;
    rk_msg_header_init(&c->h, c->t->id, 128);
    rk_msg_encode(c->t, &c->h, c->obj, frame, sizeof(frame), &c->len);
    if (rk_msg_decode(c->t, frame, c->len, c->out, NULL, 0) != RK_OK) {
        fprintf(stderr, "bench_msg: %s does not decode: %s\n", name,
            rk_errdetail());
        exit(1);
    }
    rk_msg_free(c->t, c->out);
    snprintf(extra, sizeof(extra), "\"frame_bytes\":%zu", c->len);
    bench_emit(
        "message", "encode", name, measure(do_encode, c, iters), "ns", extra);
    bench_emit(
        "message", "decode", name, measure(do_decode, c, iters), "ns", extra);
    bench_emit("message", "msgpack_c_unpack_only", name,
        measure(do_unpack_only, c, iters), "ns", extra);
    bench_emit("message", "encode_decode", name,
        measure(do_roundtrip, c, iters), "ns", extra);
    if (c->t->fixed_size != 0) {
        snprintf(extra, sizeof(extra), "\"slot_bytes\":%u", c->t->fixed_size);
        bench_emit("message", "fixed_write", name,
            measure(do_fixed_write, c, iters), "ns", extra);
        bench_emit("message", "fixed_read", name,
            measure(do_fixed_read, c, iters), "ns", extra);
    }
}

int
main(int argc, char **argv)
{
    size_t iters = (size_t)(200000 * bench_scale());
    static rkt_m64 m64, m64o;
    static rkt_m256 m256, m256o;
    static rkt_m1k m1k, m1ko;
    static rkt_mixed mx, mxo;
    static float samples[48];
    struct codec_case c;

    if (iters < 100)
        iters = 100;
    only = argc > 1 ? argv[1] : NULL;
    m64.seq = 1;
    for (int i = 0; i < 14; i++)
        m64.data[i] = (float)i * 0.25f;
    m256.seq = 2;
    m256.scale = 0.5;
    for (int i = 0; i < 60; i++)
        m256.data[i] = (float)i * 0.25f;
    m1k.seq = 3;
    m1k.scale = 0.5;
    for (int i = 0; i < 252; i++)
        m1k.data[i] = (float)i * 0.25f;
    /* 8+8+8+4+1 + 35-char label + 48 floats = 256 bytes of field data */
    mx.seq = 4;
    mx.a = 1.5;
    mx.b = -2.5;
    mx.n = 7;
    mx.ok = true;
    mx.label.ptr = "a label of thirty-five characters..";
    mx.label.len = (uint32_t)strlen(mx.label.ptr);
    for (int i = 0; i < 48; i++)
        samples[i] = (float)i;
    mx.samples.ptr = samples;
    mx.samples.len = 48;

    c = (struct codec_case) {
        .t = &rkt_m64_msgtype, .obj = &m64, .out = &m64o
    };
    run_case("msgpack_64B", &c, iters);
    c = (struct codec_case) {
        .t = &rkt_m256_msgtype, .obj = &m256, .out = &m256o
    };
    run_case("msgpack_256B", &c, iters);
    c = (struct codec_case) {
        .t = &rkt_m1k_msgtype, .obj = &m1k, .out = &m1ko
    };
    run_case("msgpack_1KB", &c, iters);
    c = (struct codec_case) {
        .t = &rkt_mixed_msgtype, .obj = &mx, .out = &mxo
    };
    run_case("msgpack_256B_mixed", &c, iters);
    if (only != NULL)
        return sink == 42 ? 1 : 0;
    bench_emit("message", "uuid_v7", "rk_uuid_v7",
        measure(do_uuid, NULL, iters), "ns", NULL);
    bench_emit("message", "header_init", "rk_msg_header_init",
        measure(do_header, NULL, iters), "ns", NULL);
    return sink == 42 ? 1 : 0;
}
