/* Fixed-layout form, layout descriptor and the type registry. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "msg_test_types.h"
#include "ringkernel/ringkernel.h"

/* The documented fixed layout of Particle (docs/messages.md): natural
 * alignment, so a GPU struct from the same declaration matches. */
_Static_assert(offsetof(rkt_particle, pos) == 0, "layout");
_Static_assert(offsetof(rkt_particle, vel) == 16, "layout");
_Static_assert(offsetof(rkt_particle, id) == 28, "layout");
_Static_assert(offsetof(rkt_particle, alive) == 32, "layout");
_Static_assert(offsetof(rkt_particle, mask) == 33, "layout");
_Static_assert(offsetof(rkt_particle, charge) == 40, "layout");
_Static_assert(sizeof(rkt_particle) == 48, "layout");
_Static_assert(RK_MSGTYPE_FIXED(rkt_particle), "fixed");
_Static_assert(RK_MSGTYPE_FIXED(rkt_point), "fixed");
_Static_assert(!RK_MSGTYPE_FIXED(rkt_all), "variable");

static void
assert_detail_has(const char *what)
{
    if (strstr(rk_errdetail(), what) == NULL)
        fail_msg("detail '%s' lacks '%s'", rk_errdetail(), what);
}

static void
test_descriptor(void **state)
{
    const rk_msgtype *t = &rkt_particle_msgtype;
    const rk_msgfield *f = rk_msgtype_fields(t);

    (void)state;
    assert_string_equal(t->name, "Particle");
    assert_int_equal(t->id, 0x102);
    assert_int_equal(t->version, 3);
    assert_int_equal(t->nfields, 6);
    assert_int_equal(t->size, sizeof(rkt_particle));
    assert_int_equal(rk_msg_fixed_size(t), sizeof(rkt_particle));
    assert_int_equal(t->nbools, 4);
    assert_string_equal(f[0].name, "pos");
    assert_int_equal(f[0].cls, RK_FC_NESTED);
    assert_ptr_equal(f[0].nested, &rkt_point_msgtype);
    assert_int_equal(f[1].cls, RK_FC_ARRAY);
    assert_int_equal(f[1].kind, RK_FK_FLOAT);
    assert_int_equal(f[1].count, 3);
    assert_int_equal(f[1].offset, offsetof(rkt_particle, vel));
    assert_int_equal(f[5].kind, RK_FK_INT64);
    assert_int_equal(f[5].offset, offsetof(rkt_particle, charge));
    f = rk_msgtype_fields(&rkt_all_msgtype);
    assert_int_equal(rk_msg_fixed_size(&rkt_all_msgtype), 0);
    assert_int_equal(f[13].cls, RK_FC_VLA);
    assert_int_equal(f[13].count, 1024);
    assert_int_equal(f[16].cls, RK_FC_STRING);
    assert_int_equal(f[16].count, 64);
}

static void
test_fixed_roundtrip(void **state)
{
    rkt_particle p, q;
    unsigned char slot[64];

    (void)state;
    memset(&p, 0, sizeof(p));
    p.pos.x = 1.5;
    p.pos.y = -3;
    p.vel[2] = 9.5f;
    p.id = 77;
    p.alive = true;
    p.mask[1] = true;
    p.charge = -5;
    assert_int_equal(rk_msg_fixed_write(&rkt_particle_msgtype, &p, slot,
                                        sizeof(slot)),
                     RK_OK);
    /* Little-endian bytes at the documented offsets. */
    assert_int_equal(slot[28], 77);
    assert_int_equal(slot[32], 1);
    assert_int_equal(slot[34], 1);
    assert_int_equal(slot[40], 0xfb);
    assert_int_equal(slot[47], 0xff);
    assert_int_equal(rk_msg_fixed_read(&rkt_particle_msgtype, slot, 48, &q),
                     RK_OK);
    assert_memory_equal(&p, &q, sizeof(p));
    assert_int_equal(
        rk_msg_fixed_write(&rkt_particle_msgtype, &p, slot, 47), RK_EMSGSIZE);
    assert_int_equal(rk_msg_fixed_read(&rkt_particle_msgtype, slot, 47, &q),
                     RK_ETRUNCATED);
    assert_int_equal(rk_msg_fixed_read(&rkt_particle_msgtype, slot, 49, &q),
                     RK_EDECODE);
    slot[34] = 2; /* mask[1] is not a bool */
    assert_int_equal(rk_msg_fixed_read(&rkt_particle_msgtype, slot, 48, &q),
                     RK_EDECODE);
    assert_detail_has("Particle.mask");
    assert_int_equal(q.id, 0); /* zeroed on failure */
    slot[34] = 1;
    slot[32] = 0xff;
    assert_int_equal(rk_msg_fixed_read(&rkt_particle_msgtype, slot, 48, &q),
                     RK_EDECODE);
    assert_detail_has("Particle.alive");
}

static void
test_fixed_refuses_variable(void **state)
{
    rkt_all a;
    unsigned char slot[512];

    (void)state;
    memset(&a, 0, sizeof(a));
    assert_int_equal(
        rk_msg_fixed_write(&rkt_all_msgtype, &a, slot, sizeof(slot)),
        RK_ENOTSUP);
    assert_detail_has("AllTypes");
    assert_int_equal(
        rk_msg_fixed_read(&rkt_all_msgtype, slot, sizeof(a), &a), RK_ENOTSUP);
}

static void
test_layout_hash(void **state)
{
    uint64_t h = rk_msgtype_layout_hash(&rkt_particle_msgtype);

    (void)state;
    assert_true(h == rk_msgtype_layout_hash(&rkt_particle_msgtype));
    assert_true(h != rk_msgtype_layout_hash(&rkt_point_msgtype));
    assert_true(rk_msgtype_layout_hash(&rkt_m256_msgtype)
                != rk_msgtype_layout_hash(&rkt_m1k_msgtype));
}

/* A second, conflicting descriptor for the registry tests. */
#define DUP_FIELDS(X) X(v, RK_INT32)
RK_MSGTYPE_DECLARE(dup_id, DUP_FIELDS);
RK_MSGTYPE_DEFINE(dup_id, "NotPoint", 0x100, DUP_FIELDS);
RK_MSGTYPE_DECLARE(dup_name, DUP_FIELDS);
RK_MSGTYPE_DEFINE(dup_name, "Point", 0x9999, DUP_FIELDS);
RK_MSGTYPE_DECLARE(bad_zero, DUP_FIELDS);
RK_MSGTYPE_DEFINE(bad_zero, "Zero", 0, DUP_FIELDS);
#define RESERVED_FIELDS(X) X(priority, RK_INT32)
RK_MSGTYPE_DECLARE(bad_reserved, RESERVED_FIELDS);
RK_MSGTYPE_DEFINE(bad_reserved, "Reserved", 0x777, RESERVED_FIELDS);

static void
test_registry(void **state)
{
    rk_msg_header h;

    (void)state;
    assert_int_equal(rk_msgtype_register(&rkt_point_msgtype), RK_OK);
    assert_int_equal(rk_msgtype_register(&rkt_point_msgtype), RK_OK);
    assert_int_equal(rk_msgtype_register(&rkt_all_msgtype), RK_OK);
    assert_int_equal(rk_msgtype_register(&rkt_particle_msgtype), RK_OK);
    assert_int_equal(rk_msgtype_register(&dup_id_msgtype), RK_EEXIST);
    assert_detail_has("Point");
    assert_detail_has("NotPoint");
    assert_int_equal(rk_msgtype_register(&dup_name_msgtype), RK_EEXIST);
    assert_detail_has("Point");
    assert_int_equal(rk_msgtype_register(&bad_zero_msgtype), RK_EINVAL);
    assert_int_equal(rk_msgtype_register(&bad_reserved_msgtype), RK_EINVAL);
    assert_detail_has("priority");
    assert_int_equal(rk_msgtype_register(NULL), RK_EINVAL);

    assert_ptr_equal(rk_msgtype_by_id(0x100), &rkt_point_msgtype);
    assert_ptr_equal(rk_msgtype_by_id(0x101), &rkt_all_msgtype);
    assert_null(rk_msgtype_by_id(0x9999));
    assert_ptr_equal(rk_msgtype_by_name("AllTypes"), &rkt_all_msgtype);
    assert_ptr_equal(rk_msgtype_by_name_n("Pointless", 5),
                     &rkt_point_msgtype);
    assert_null(rk_msgtype_by_name("Poin"));
    assert_null(rk_msgtype_by_name(NULL));

    assert_int_equal(rk_msgtype_check(&rkt_point_msgtype, &rkt_point_msgtype),
                     RK_OK);
    assert_int_equal(rk_msgtype_check(&rkt_point_msgtype, &rkt_all_msgtype),
                     RK_ETYPE);
    assert_detail_has("expected Point");
    assert_detail_has("AllTypes");
    rk_msg_header_init(&h, rkt_all_msgtype.id, 1);
    h.type_version = 1;
    assert_int_equal(rk_msg_header_check(&h, &rkt_all_msgtype), RK_OK);
    assert_int_equal(rk_msg_header_check(&h, &rkt_point_msgtype), RK_ETYPE);
    assert_detail_has("Point");
    assert_detail_has("AllTypes");
    h.type_id = 0x4242;
    assert_int_equal(rk_msg_header_check(&h, &rkt_point_msgtype), RK_ETYPE);
    assert_detail_has("16962"); /* the unknown id, in decimal */
    h.type_id = rkt_particle_msgtype.id;
    h.type_version = 1;
    assert_int_equal(rk_msg_header_check(&h, &rkt_particle_msgtype),
                     RK_ETYPE);
    assert_detail_has("version");
}

/* Concurrent registration and lock-free look-ups (TSan checks). */
static void *
lookup_loop(void *arg)
{
    (void)arg;
    for (int i = 0; i < 20000; i++) {
        const rk_msgtype *t = rk_msgtype_by_id(0x110 + (uint32_t)(i % 4));

        if (t != NULL && t->id != 0x110 + (uint32_t)(i % 4))
            return (void *)1;
        t = rk_msgtype_by_name("Msg1K");
        if (t != NULL && t != &rkt_m1k_msgtype)
            return (void *)1;
    }
    return NULL;
}

static void *
register_all(void *arg)
{
    static const rk_msgtype *const types[] = {
        &rkt_m64_msgtype, &rkt_m256_msgtype, &rkt_m1k_msgtype,
        &rkt_mixed_msgtype
    };

    (void)arg;
    for (size_t i = 0; i < 4; i++)
        if (rk_msgtype_register(types[i]) != RK_OK)
            return (void *)1;
    return NULL;
}

static void
test_registry_threads(void **state)
{
    pthread_t th[4];
    void *ret;

    (void)state;
    assert_int_equal(pthread_create(&th[0], NULL, lookup_loop, NULL), 0);
    assert_int_equal(pthread_create(&th[1], NULL, register_all, NULL), 0);
    assert_int_equal(pthread_create(&th[2], NULL, register_all, NULL), 0);
    assert_int_equal(pthread_create(&th[3], NULL, lookup_loop, NULL), 0);
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], &ret);
        assert_null(ret);
    }
    assert_ptr_equal(rk_msgtype_by_id(0x113), &rkt_mixed_msgtype);
    assert_ptr_equal(rk_msgtype_by_name("Msg64"), &rkt_m64_msgtype);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_descriptor),
        cmocka_unit_test(test_fixed_roundtrip),
        cmocka_unit_test(test_fixed_refuses_variable),
        cmocka_unit_test(test_layout_hash),
        cmocka_unit_test(test_registry),
        cmocka_unit_test(test_registry_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
