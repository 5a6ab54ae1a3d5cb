/*
 * libFuzzer: kernel configuration sizes through register and launch
 * (issue 10, defect 1).
 *
 * The input picks a kernel's sizes (capacities, max_payload, batch), its
 * queue kind (bands, single producer, backpressure) and two message
 * lengths. The contract checked:
 *   - rk_runtime_register accepts a configuration only within the limits
 *     of runtime.h (RK_KERNEL_MAX_*), and refuses one outside with
 *     RK_EINVAL and a detail naming a size field;
 *   - an accepted kernel that fits the fuzzer's memory budget launches,
 *     and a host send and an actor send of the fuzzed lengths either go
 *     through intact or are refused with RK_EMSGSIZE (len > max_payload);
 *     ASan sees any write past a slot.
 *
 * Before the size checks (issue 10, defect 1) register accepted every
 * size and this target aborted at once; max_payload near UINT32_MAX
 * overflowed the output ring (ASan).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ringkernel/ringkernel.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

#define BUDGET   (UINT64_C(8) << 20) /* bytes a launched queue may take */
#define MAX_SEND (UINT32_C(1) << 17)

static unsigned char src[MAX_SEND + 1], dst[MAX_SEND + 1];

typedef struct fz {
    uint32_t in_cap, out_cap, max_payload, batch;
    uint8_t flags;
    uint32_t host_len, actor_len;
} fz;

static uint32_t
take32(const unsigned char **p, size_t *n)
{
    uint32_t v = 0;
    size_t k = *n < 4 ? *n : 4;

    memcpy(&v, *p, k);
    *p += k;
    *n -= k;
    return v;
}

static uint64_t
eff(uint32_t v, uint32_t dflt)
{
    return v == 0 ? dflt : v;
}

/* The actor: answers each message with actor_len bytes (from user). */
static int
fz_actor(rk_ctx *ctx)
{
    const fz *f = rk_ctx_user(ctx);
    rk_msg_view m;
    int rc;

    while ((rc = rk_ctx_recv(ctx, &m, RK_WAIT_FOREVER)) == RK_OK) {
        uint32_t n = f->actor_len % (MAX_SEND + 1);
        rc = rk_ctx_send(ctx, 0, src, n);
        if (rc == RK_EMSGSIZE && n <= eff(f->max_payload, 192))
            abort(); /* refused a length within max_payload */
        if (rc == RK_OK && n > eff(f->max_payload, 192))
            abort(); /* sent more than max_payload */
        if (rc != RK_OK && rc != RK_EMSGSIZE)
            return rc;
        /* Always answer, so the host never waits for nothing. */
        if ((rc = rk_ctx_send(ctx, 0, src, 0)) != RK_OK)
            return rc;
    }
    return rc == RK_ECLOSED ? RK_OK : rc;
}

static int
within_limits(const fz *f)
{
    uint64_t in = eff(f->in_cap, 1024), out = eff(f->out_cap, 1024);
    uint64_t mp = eff(f->max_payload, 192), b = eff(f->batch, 64);
    uint64_t slot = (64 + mp + 63) & ~(uint64_t)63;

    /* Any capacity up to the limit (issue 27); 0 took the default. */
    return in <= RK_KERNEL_MAX_CAPACITY && out <= RK_KERNEL_MAX_CAPACITY && mp <= RK_KERNEL_MAX_PAYLOAD
        && b <= RK_KERNEL_MAX_BATCH && in * slot <= RK_KERNEL_MAX_QUEUE_BYTES
        && out * slot <= RK_KERNEL_MAX_QUEUE_BYTES;
}

static int
names_a_size(const char *d)
{
    static const char *const fields[]
        = { "input_capacity", "output_capacity", "max_payload", "batch" };

    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
        if (strstr(d, fields[i]) != NULL)
            return 1;
    return 0;
}

static void
run(rk_runtime *rt, fz *f)
{
    rk_kernel k;
    size_t len = 0;
    uint32_t n = f->host_len % (MAX_SEND + 1);
    uint64_t mp = eff(f->max_payload, 192);
    int rc;

    if (rk_kernel_launch(rt, "fz") != RK_OK
        || rk_kernel_activate(rt, "fz") != RK_OK
        || rk_kernel_lookup(rt, "fz", &k) != RK_OK)
        return; /* out of memory is allowed */
    rc = rk_send(rt, k, 0, src, n, (uint8_t)(f->flags * 37u), RK_WAIT_FOREVER);
    if (rc == RK_EMSGSIZE) {
        if (n <= mp)
            abort();
        return;
    }
    if (rc != RK_OK)
        abort();
    if (n > mp)
        abort(); /* took a payload longer than max_payload */
    for (int i = 0; i < 2; i++) {
        rc = rk_recv(
            rt, k, NULL, dst, sizeof(dst), &len, 10 * INT64_C(1000000000));
        if (rc != RK_OK)
            abort();
        if (len != 0 && memcmp(dst, src, len) != 0)
            abort();
        if (len == 0)
            break; /* the actor's own send was refused */
    }
}

int
LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    rk_runtime_config cfg = { .no_static_kernels = true };
    rk_kernel_def def = { .id = "fz", .actor = fz_actor };
    rk_runtime *rt = NULL;
    fz f;
    int rc;

    if (src[1] == 0)
        for (size_t i = 0; i < sizeof(src); i++)
            src[i] = (unsigned char)(i * 131u + 7u);
    f.in_cap = take32(&data, &size);
    f.out_cap = take32(&data, &size);
    f.max_payload = take32(&data, &size);
    f.batch = take32(&data, &size);
    f.flags = size ? data[0] : 0;
    if (size) {
        data++;
        size--;
    }
    f.host_len = take32(&data, &size);
    f.actor_len = take32(&data, &size);
    def.config.input_capacity = f.in_cap;
    def.config.output_capacity = f.out_cap;
    def.config.max_payload = f.max_payload;
    def.config.batch = f.batch;
    def.config.priority_bands = f.flags & 1;
    def.config.single_producer = (f.flags >> 1) & 1;
    def.config.backpressure = (rk_backpressure)((f.flags >> 2) & 3);
    def.config.user = &f;

    if (rk_runtime_create(&rt, &cfg) != RK_OK)
        return 0;
    rc = rk_runtime_register(rt, &def);
    if (rc == RK_OK) {
        uint64_t slot = (64 + eff(f.max_payload, 192) + 63) & ~(uint64_t)63;
        uint64_t bands = def.config.priority_bands ? 4 : 1;
        if (!within_limits(&f))
            abort(); /* accepted a size outside the documented limits */
        if (eff(f.in_cap, 1024) * slot * bands <= BUDGET
            && eff(f.out_cap, 1024) * slot <= BUDGET
            && eff(f.batch, 64) * slot <= BUDGET)
            run(rt, &f);
    } else if (rc == RK_EINVAL) {
        if (!within_limits(&f) && !names_a_size(rk_errdetail()))
            abort(); /* refused a size without naming the field */
    } else if (rc != RK_ENOMEM) {
        abort();
    }
    rk_runtime_destroy(rt);
    return 0;
}
