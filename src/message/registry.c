/*
 * src/message/registry.c - message types by id and by name.
 *
 * Two open-addressing tables of atomic descriptor pointers, twice as large
 * as the most types we accept so probes stay short. Entries are never
 * removed, so a reader probes until it finds its key or an empty slot,
 * without a lock. Writers serialise on a mutex and publish a slot with a
 * release store that pairs with the readers' acquire loads.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "common/common.h"
#include "message_internal.h"
#include "ringkernel/message.h"

#define TABLE_SIZE (2 * RK_MSGTYPE_MAX)
#define TABLE_MASK (TABLE_SIZE - 1)

_Static_assert((TABLE_SIZE & TABLE_MASK) == 0, "table size power of two");

static _Atomic(const rk_msgtype *) by_id[TABLE_SIZE];
static _Atomic(const rk_msgtype *) by_name[TABLE_SIZE];
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static size_t reg_count; /* under reg_lock */

static uint32_t
hash_id(uint32_t id)
{
    return (id * UINT32_C(0x9E3779B1)) >> 7;
}

static uint32_t
hash_name(const char *s, size_t n)
{
    return (uint32_t)rk__fnv1a(UINT64_C(0xcbf29ce484222325), s, n);
}

/* Lengths first: name may hold NULs (a wire "__type__" can), so a
 * strncmp could stop early and t->name[n] would then be read past the
 * registered name's end. strlen reads t->name only up to its own NUL. */
static int
name_eq(const rk_msgtype *t, const char *name, size_t n)
{
    return strlen(t->name) == n && memcmp(t->name, name, n) == 0;
}

const rk_msgtype *
rk_msgtype_by_id(uint32_t id)
{
    for (uint32_t i = hash_id(id), k = 0; k < TABLE_SIZE; i++, k++) {
        /* Pairs with the release store in rk_msgtype_register. */
        const rk_msgtype *t = atomic_load_explicit(
            &by_id[i & TABLE_MASK], memory_order_acquire);
        if (t == NULL)
            return NULL;
        if (t->id == id)
            return t;
    }
    return NULL;
}

const rk_msgtype *
rk_msgtype_by_name_n(const char *name, size_t len)
{
    if (name == NULL)
        return NULL;
    for (uint32_t i = hash_name(name, len), k = 0; k < TABLE_SIZE; i++, k++) {
        /* Pairs with the release store in rk_msgtype_register. */
        const rk_msgtype *t = atomic_load_explicit(
            &by_name[i & TABLE_MASK], memory_order_acquire);
        if (t == NULL)
            return NULL;
        if (name_eq(t, name, len))
            return t;
    }
    return NULL;
}

const rk_msgtype *
rk_msgtype_by_name(const char *name)
{
    return name == NULL ? NULL : rk_msgtype_by_name_n(name, strlen(name));
}

static void
insert(_Atomic(const rk_msgtype *) *table, uint32_t h, const rk_msgtype *t)
{
    for (uint32_t i = h;; i++) {
        if (atomic_load_explicit(&table[i & TABLE_MASK], memory_order_relaxed)
            == NULL) {
            /* Pairs with the acquire loads in the look-ups. */
            atomic_store_explicit(
                &table[i & TABLE_MASK], t, memory_order_release);
            return;
        }
    }
}

int
rk_msgtype_register(const rk_msgtype *t)
{
    const rk_msgtype *old;
    int rc;

    if (t == NULL)
        return rk__fail(RK_EINVAL, "rk_msgtype_register: NULL type");
    rc = rk__msgtype_validate(t, 0);
    if (rc != RK_OK)
        return rc;
    pthread_mutex_lock(&reg_lock);
    old = rk_msgtype_by_id(t->id);
    if (old == t) {
        rc = RK_OK;
    } else if (old != NULL) {
        rc = rk__fail(RK_EEXIST, "type id %u is %s already, cannot be %s",
            t->id, old->name, t->name);
    } else if ((old = rk_msgtype_by_name(t->name)) != NULL) {
        rc = rk__fail(RK_EEXIST, "type name %s has id %u already, not %u",
            t->name, old->id, t->id);
    } else if (reg_count >= RK_MSGTYPE_MAX) {
        rc = rk__fail(RK_ENOMEM, "registry full (%d types)", RK_MSGTYPE_MAX);
    } else {
        insert(by_id, hash_id(t->id), t);
        insert(by_name, hash_name(t->name, strlen(t->name)), t);
        reg_count++;
        rc = RK_OK;
    }
    pthread_mutex_unlock(&reg_lock);
    return rc;
}

int
rk_msgtype_check(const rk_msgtype *expected, const rk_msgtype *got)
{
    if (got == expected)
        return RK_OK;
    if (expected == NULL)
        return rk__fail(RK_ETYPE, "no expected type given");
    if (got == NULL)
        return rk__fail(RK_ETYPE, "expected %s (id %u), got no type",
            expected->name, expected->id);
    return rk__fail(RK_ETYPE, "expected %s (id %u), got %s (id %u)",
        expected->name, expected->id, got->name, got->id);
}

int
rk_msg_header_check(const rk_msg_header *h, const rk_msgtype *expected)
{
    const rk_msgtype *got;

    if (h == NULL || expected == NULL)
        return rk__fail(RK_EINVAL, "rk_msg_header_check: NULL argument");
    if (h->type_id == expected->id) {
        if (h->type_version == expected->version)
            return RK_OK;
        return rk__fail(RK_ETYPE, "expected %s version %u, got version %u",
            expected->name, expected->version, h->type_version);
    }
    got = rk_msgtype_by_id(h->type_id);
    if (got == NULL)
        return rk__fail(RK_ETYPE, "expected %s (id %u), got unknown id %u",
            expected->name, expected->id, h->type_id);
    return rk_msgtype_check(expected, got);
}
