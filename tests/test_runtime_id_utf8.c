/*
 * Kernel ids and topic names must be valid UTF-8 (issue 27, item 4): an
 * id like "bad-\xff\xfe" used to be accepted at register, and /metrics
 * and /stats.json then carried raw bytes that prometheus_client and every
 * JSON parser refuse, which lost the whole scrape. Register, subscribe,
 * publish and rk_metrics_add_topic now refuse such a name with RK_EINVAL
 * and a detail naming the byte offset; every name that is accepted
 * (accents, CJK, emoji, quotes, backslashes, control characters) renders
 * as a valid exposition and valid JSON, all of it valid UTF-8.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/common.h"
#include "json_check.h"
#include "prom_text.h"
#include "ringkernel/ringkernel.h"
#include "rt_helpers.h"

static int
nop_handler(rk_ctx *ctx, const rk_msg_view *m)
{
    (void)ctx;
    (void)m;
    return RK_OK;
}

static int
reg(rk_runtime *rt, const char *id)
{
    rk_kernel_def def = { .id = id, .handler = nop_handler };
    return rk_runtime_register(rt, &def);
}

/* Not UTF-8, each with the offset of its first bad byte. */
static const struct {
    const char *s;
    const char *at;
} bad[] = {
    { "bad-\xff\xfe", "byte 4" },
    { "\x80lead", "byte 0" },            /* a lone continuation byte */
    { "trunc\xc3", "byte 5" },           /* a sequence cut short */
    { "over\xc0\xaflong", "byte 4" },    /* an overlong '/' */
    { "sur\xed\xa0\x80", "byte 3" },     /* a UTF-16 surrogate */
    { "big\xf4\x90\x80\x80", "byte 3" }, /* above U+10FFFF */
};

static void
test_register_refuses_bad_utf8(void **state)
{
    rk_runtime *rt = rt_new_runtime();
    char ids[4][RK_ID_MAX + 1];
    size_t n = 0;
    (void)state;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(reg(rt, bad[i].s), RK_EINVAL);
        if (strstr(rk_errdetail(), bad[i].at) == NULL
            || strstr(rk_errdetail(), "UTF-8") == NULL)
            fail_msg("id %zu: detail '%s' does not say UTF-8 at %s", i,
                rk_errdetail(), bad[i].at);
        /* The detail itself stays valid UTF-8 (it quotes only the part
         * before the bad byte). */
        assert_true(rk__utf8_valid(rk_errdetail(), strlen(rk_errdetail())));
    }
    assert_int_equal(rk_runtime_kernel_ids(rt, ids, 4, &n), RK_OK);
    assert_int_equal(n, 0);
    rk_runtime_destroy(rt);
}

static void
test_topics_refuse_bad_utf8(void **state)
{
    rk_runtime *rt = rt_new_runtime();
    rk_metrics *m;
    uint32_t v = 1;
    size_t delivered = 0;
    (void)state;

    assert_int_equal(reg(rt, "k"), RK_OK);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(rk_subscribe(rt, "k", bad[i].s), RK_EINVAL);
        assert_non_null(strstr(rk_errdetail(), bad[i].at));
        assert_int_equal(
            rk_publish(rt, bad[i].s, 0, &v, sizeof(v), 0, RT_LONG, &delivered),
            RK_EINVAL);
        assert_non_null(strstr(rk_errdetail(), "UTF-8"));
    }
    assert_int_equal(rk_metrics_create(&m, rt, NULL), RK_OK);
    assert_int_equal(rk_metrics_add_topic(m, "ok-topic"), RK_OK);
    assert_int_equal(rk_metrics_add_topic(m, "bad-\xff\xfe"), RK_EINVAL);
    assert_non_null(strstr(rk_errdetail(), "byte 4"));
    rk_metrics_destroy(m);
    rk_runtime_destroy(rt);
}

/* Every accepted name renders as valid UTF-8, a valid exposition and
 * valid JSON. */
static void
test_accepted_names_render_valid(void **state)
{
    static const char *const ids[] = {
        "na\xc3\xafve-\xce\xba",  /* naïve-κ */
        "\xe6\xa0\xb8-kernel",    /* 核-kernel */
        "emoji-\xf0\x9f\x9a\x80", /* a 4-byte sequence */
        "q\"uote\\back",          /* label escapes */
        "ctl\t\r\x01\x7f-end",    /* control characters */
        "new\nline",
    };
    const char *topics[] = { "t-\xc3\xa9t\xc3\xa9", NULL };
    rk_metrics_config mc = { .topics = topics, .no_gpu_monitor = true };
    rk_runtime *rt = rt_new_runtime();
    rk_metrics *m;
    exposition e;
    char *out;
    size_t len;
    (void)state;

    for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
        assert_int_equal(reg(rt, ids[i]), RK_OK);
        assert_int_equal(rk_subscribe(rt, ids[i], topics[0]), RK_OK);
    }
    assert_int_equal(rk_metrics_create(&m, rt, &mc), RK_OK);
    assert_int_equal(
        rk_metrics_render(m, RK_METRICS_PROMETHEUS, &out, &len), RK_OK);
    assert_true(rk__utf8_valid(out, len));
    parse_exposition(out, &e);
    for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
        char labels[128];
        snprintf(labels, sizeof(labels), "kernel=\"%s\"", ids[i]);
        assert_true(has(&e, "ringkernel_messages_processed_total", labels));
    }
    free(e.s);
    free(out);
    assert_int_equal(rk_metrics_render(m, RK_METRICS_JSON, &out, &len), RK_OK);
    assert_true(rk__utf8_valid(out, len));
    assert_true(json_valid(out, len));
    free(out);
    rk_metrics_destroy(m);
    rk_runtime_destroy(rt);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_register_refuses_bad_utf8),
        cmocka_unit_test(test_topics_refuse_bad_utf8),
        cmocka_unit_test(test_accepted_names_render_valid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
