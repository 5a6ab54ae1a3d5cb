/*
 * queue_demo - what ringkernel's queues do, in four short scenes:
 *   1. SPSC throughput between two threads (plain and batched);
 *   2. priority bands: the highest non-empty band is served first;
 *   3. each backpressure strategy on a full queue, with its counters;
 *   4. a blocking receiver parked on an empty inbox, woken by a send.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ringkernel/ringkernel.h"

#define CHECK(expr)                                                           \
    do {                                                                      \
        int rc_ = (expr);                                                     \
        if (rc_ != RK_OK) {                                                   \
            fprintf(stderr, "%s: %s (%s)\n", #expr, rk_err_name(rc_),         \
                rk_errdetail());                                              \
            return 1;                                                         \
        }                                                                     \
    } while (0)

#define N_MSGS 5000000u

static rk_spsc *ring;

static void *
producer(void *arg)
{
    int batch = *(int *)arg;
    uint64_t buf[64];
    for (uint64_t i = 0; i < N_MSGS;) {
        if (batch) {
            uint32_t k = N_MSGS - i < 64 ? (uint32_t)(N_MSGS - i) : 64;
            for (uint32_t j = 0; j < k; j++)
                buf[j] = i + j;
            i += rk_spsc_enqueue_batch(ring, buf, k);
        } else if (rk_spsc_try_enqueue(ring, &i) == RK_OK) {
            i++;
        }
    }
    return NULL;
}

static int
scene_spsc(void)
{
    printf(
        "1. SPSC ring, %u messages of 8 bytes between two threads\n", N_MSGS);
    CHECK(rk_spsc_create(&ring, 4096, sizeof(uint64_t)));
    for (int batch = 0; batch < 2; batch++) {
        pthread_t t;
        uint64_t t0 = rk_now_ns(), sum = 0, got = 0, buf[64];
        pthread_create(&t, NULL, producer, &batch);
        while (got < N_MSGS) {
            uint32_t k = batch ? rk_spsc_dequeue_batch(ring, buf, 64)
                               : (rk_spsc_try_dequeue(ring, buf) == RK_OK);
            for (uint32_t j = 0; j < k; j++)
                sum += buf[j];
            got += k;
        }
        pthread_join(t, NULL);
        double secs = (double)(rk_now_ns() - t0) / 1e9;
        printf("   %-8s %6.1f M msgs/s  (checksum %s)\n",
            batch ? "batched" : "single", N_MSGS / secs / 1e6,
            sum == (uint64_t)N_MSGS * (N_MSGS - 1) / 2 ? "ok" : "BAD");
    }
    rk_spsc_destroy(ring);
    return 0;
}

static int
scene_bands(void)
{
    printf("\n2. Priority bands: sent in this order, received by band\n");
    rk_mqueue_config cfg
        = { .capacity = 8, .slot_size = 32, .priority_bands = true };
    rk_mqueue *q;
    CHECK(rk_mqueue_create(&q, &cfg));
    static const struct {
        const char *text;
        uint8_t prio;
    } msgs[] = { { "low: housekeeping", 10 }, { "normal: request A", 100 },
        { "system: shutdown?", 240 }, { "high: deadline", 200 },
        { "normal: request B", 100 }, { "low: stats", 0 } };
    static const char *band_names[] = { "LOW", "NORMAL", "HIGH", "SYSTEM" };
    printf("   sent:    ");
    for (size_t i = 0; i < sizeof(msgs) / sizeof(msgs[0]); i++) {
        CHECK(rk_mqueue_send(q, msgs[i].text, strlen(msgs[i].text) + 1,
            msgs[i].prio, RK_NO_WAIT));
        printf("%s%s", i ? ", " : "", msgs[i].text);
    }
    printf("\n");
    char buf[32];
    size_t len;
    while (rk_mqueue_recv(q, buf, sizeof(buf), &len, RK_NO_WAIT) == RK_OK)
        printf("   received %-18s\n", buf);
    for (int p = 0; p <= 255; p += 255 / 5)
        printf("   priority %3d -> %s\n", p,
            band_names[rk_priority_band((uint8_t)p)]);
    rk_mqueue_destroy(q);
    return 0;
}

static int
scene_backpressure(void)
{
    static const char *names[]
        = { "BLOCK", "REJECT", "DROP_OLDEST", "DROP_NEW" };
    printf("\n3. Backpressure: 6 sends into a queue of 4 (no receiver)\n");
    for (int bp = RK_BP_BLOCK; bp <= RK_BP_DROP_NEW; bp++) {
        rk_mqueue_config cfg = {
            .capacity = 4, .slot_size = 8, .backpressure = (rk_backpressure)bp
        };
        rk_mqueue *q;
        CHECK(rk_mqueue_create(&q, &cfg));
        printf("   %-11s sends:", names[bp]);
        for (uint32_t i = 1; i <= 6; i++) {
            /* BLOCK waits 1 ms for room that never comes. */
            int rc = rk_mqueue_send(q, &i, sizeof(i), 0, 1000000);
            printf(" %s", rc == RK_OK ? "ok" : rk_err_name(rc) + 3);
        }
        rk_queue_stats s;
        rk_mqueue_stats(q, &s);
        printf("\n               queue holds:");
        uint32_t v;
        size_t len;
        while (rk_mqueue_recv(q, &v, sizeof(v), &len, RK_NO_WAIT) == RK_OK)
            printf(" %u", v);
        printf("   (enqueued %llu, dropped %llu, rejected %llu, "
               "high water %llu)\n",
            (unsigned long long)s.enqueued, (unsigned long long)s.dropped,
            (unsigned long long)s.rejected, (unsigned long long)s.high_water);
        rk_mqueue_destroy(q);
    }
    return 0;
}

static void *
late_sender(void *arg)
{
    rk_mqueue *q = arg;
    const char msg[] = "wake up";
    rk_mqueue_send(q, msg, sizeof(msg), 128, RK_WAIT_FOREVER);
    rk_mqueue_close(q);
    return NULL;
}

static int
scene_parking(void)
{
    printf("\n4. Blocking receive: parks on an empty inbox until a send\n");
    rk_mqueue *q;
    CHECK(rk_mqueue_create(&q, NULL));
    pthread_t t;
    pthread_create(&t, NULL, late_sender, q);
    char buf[256];
    size_t len;
    int rc;
    while ((rc = rk_mqueue_recv(q, buf, sizeof(buf), &len, RK_WAIT_FOREVER))
        == RK_OK)
        printf("   received \"%s\"\n", buf);
    printf("   then %s: the sender closed the queue\n", rk_err_name(rc));
    pthread_join(t, NULL);
    rk_mqueue_destroy(q);
    return 0;
}

int
main(void)
{
    if (scene_spsc() || scene_bands() || scene_backpressure()
        || scene_parking())
        return 1;
    return 0;
}
