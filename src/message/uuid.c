/*
 * src/message/uuid.c - UUID v7 generation, text form.
 *
 * The generator follows RFC 9562 section 6.2 method 1 ("fixed-length
 * dedicated counter"): after the 48-bit millisecond timestamp come 42
 * counter bits (the 12 rand_a bits and the top 30 rand_b bits), then 32
 * random bits. Each thread keeps its own timestamp, counter and PRNG, so no
 * lock or atomic is needed. A new millisecond reseeds the counter with a
 * random value whose top bit is clear, leaving room for 2^41 increments;
 * if the counter still overflows, the timestamp is advanced by one (the RFC
 * allows borrowing from the future). A clock that steps back is treated as
 * the same millisecond, so one thread's ids never go backwards.
 */
#include <pthread.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "common/common.h"
#include "ringkernel/message.h"

#define COUNTER_BITS      42
#define COUNTER_SEED_MASK ((UINT64_C(1) << (COUNTER_BITS - 1)) - 1)

struct uuid_state {
    uint64_t last_ms;
    uint64_t counter;
    uint64_t rng;
    int seeded;
};

static _Thread_local struct uuid_state tl_state;

/* A forked child starts with a copy of its parent's state, and would draw
 * the same "random" tails: reseed the forking thread's copy in the child
 * (the only thread there). */
static void
uuid_atfork_child(void)
{
    tl_state.seeded = 0;
}

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void
uuid_atfork_register(void)
{
    (void)pthread_atfork(NULL, NULL, uuid_atfork_child);
}

/* splitmix64: tiny, fast, good enough for the random tail. */
static uint64_t
next_rand(struct uuid_state *s)
{
    uint64_t z = (s->rng += UINT64_C(0x9E3779B97F4A7C15));

    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static void
seed(struct uuid_state *s)
{
    uint64_t v = 0;

    if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != (ssize_t)sizeof(v)) {
        /* No entropy yet (very early boot): mix time and addresses. */
        v = rk_now_ns() ^ (uint64_t)(uintptr_t)s
            ^ ((uint64_t)(uintptr_t)&v << 17);
    }
    s->rng = v;
    s->seeded = 1;
    (void)pthread_once(&atfork_once, uuid_atfork_register);
}

static uint64_t
unix_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

rk_uuid
rk_uuid_v7(void)
{
    struct uuid_state *s = &tl_state;
    uint64_t ms, c;
    uint32_t r;
    rk_uuid u;

    if (rk__unlikely(!s->seeded))
        seed(s);
    ms = unix_ms();
    if (ms > s->last_ms) {
        s->last_ms = ms;
        s->counter = next_rand(s) & COUNTER_SEED_MASK;
    } else if (++s->counter >> COUNTER_BITS) {
        s->last_ms++;
        s->counter = next_rand(s) & COUNTER_SEED_MASK;
    }
    ms = s->last_ms;
    c = s->counter;
    r = (uint32_t)next_rand(s);

    u.b[0] = (uint8_t)(ms >> 40);
    u.b[1] = (uint8_t)(ms >> 32);
    u.b[2] = (uint8_t)(ms >> 24);
    u.b[3] = (uint8_t)(ms >> 16);
    u.b[4] = (uint8_t)(ms >> 8);
    u.b[5] = (uint8_t)ms;
    u.b[6] = (uint8_t)(0x70u | ((c >> 38) & 0x0fu)); /* version 7 */
    u.b[7] = (uint8_t)(c >> 30);
    u.b[8] = (uint8_t)(0x80u | ((c >> 24) & 0x3fu)); /* variant 10 */
    u.b[9] = (uint8_t)(c >> 16);
    u.b[10] = (uint8_t)(c >> 8);
    u.b[11] = (uint8_t)c;
    u.b[12] = (uint8_t)(r >> 24);
    u.b[13] = (uint8_t)(r >> 16);
    u.b[14] = (uint8_t)(r >> 8);
    u.b[15] = (uint8_t)r;
    return u;
}

bool
rk_uuid_is_nil(const rk_uuid *u)
{
    static const rk_uuid nil;

    if (u == NULL)
        return true;
    return memcmp(u, &nil, sizeof(nil)) == 0;
}

int
rk_uuid_cmp(const rk_uuid *a, const rk_uuid *b)
{
    int c;

    if (a == NULL || b == NULL)
        return (a != NULL) - (b != NULL);
    c = memcmp(a->b, b->b, sizeof(a->b));

    return (c > 0) - (c < 0);
}

void
rk_uuid_format(const rk_uuid *u, char out[RK_UUID_STRLEN + 1])
{
    static const char hex[] = "0123456789abcdef";
    static const rk_uuid nil;
    size_t o = 0;

    if (out == NULL)
        return;
    if (u == NULL)
        u = &nil;
    for (size_t i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            out[o++] = '-';
        out[o++] = hex[u->b[i] >> 4];
        out[o++] = hex[u->b[i] & 0xf];
    }
    out[o] = '\0';
}

static int
hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Removes every occurrence of pat from s[0..*n) in place (str.replace). */
static void
remove_all(char *s, size_t *n, const char *pat, size_t plen)
{
    size_t r = 0, w = 0;

    while (r < *n) {
        if (*n - r >= plen && memcmp(s + r, pat, plen) == 0) {
            r += plen;
            continue;
        }
        s[w++] = s[r++];
    }
    *n = w;
}

/* Mirrors uuid.UUID(hex=...): drop "urn:" and "uuid:", strip braces at
 * both ends, drop hyphens, then exactly 32 hex digits. */
#define UUID_TEXT_MAX 128

int
rk_uuid_parse(const char *s, size_t len, rk_uuid *out)
{
    char buf[UUID_TEXT_MAX];
    size_t n = len, lo = 0, hi, w = 0;
    rk_uuid u; /* *out is written only on success */

    if (s == NULL || out == NULL)
        return rk__fail(RK_EINVAL, "rk_uuid_parse: NULL argument");
    if (len > UUID_TEXT_MAX)
        return rk__fail(RK_EDECODE, "uuid text is %zu chars, too long", len);
    memcpy(buf, s, len);
    remove_all(buf, &n, "urn:", 4);
    remove_all(buf, &n, "uuid:", 5);
    hi = n;
    while (lo < hi && (buf[lo] == '{' || buf[lo] == '}'))
        lo++;
    while (hi > lo && (buf[hi - 1] == '{' || buf[hi - 1] == '}'))
        hi--;
    for (size_t i = lo; i < hi; i++) {
        int hv, lv;

        if (buf[i] == '-')
            continue;
        if (w == 32)
            return rk__fail(RK_EDECODE, "uuid text has more than 32 digits");
        hv = hexval(buf[i]);
        if (hv < 0)
            return rk__fail(RK_EDECODE, "uuid text has a non-hex character");
        if (w % 2 == 0) {
            u.b[w / 2] = (uint8_t)(hv << 4);
        } else {
            lv = hv;
            u.b[w / 2] = (uint8_t)(u.b[w / 2] | lv);
        }
        w++;
    }
    if (w != 32)
        return rk__fail(RK_EDECODE, "uuid text has %zu hex digits, not 32", w);
    *out = u;
    return RK_OK;
}
