/*
 * src/backend/registry.c - the backends built in, and finding one by name.
 *
 * Adding a backend is a folder under src/backend/ and one line in the
 * list below (docs/backend.md shows a skeleton). The table is ordered
 * best first: "auto" takes the first whose probe succeeds and that runs
 * the kernel's code (rk__backend.code).
 */
#include <string.h>

#include "backend/backend.h"
#include "common/common.h"
#include "ringkernel/runtime.h"

/* The backends built in, best first: one line each. A backend `x` is
 * the table rk__backend_x its folder defines. */
#define RK__BACKEND_LIST(X)                                                   \
    X(cuda)                                                                   \
    X(cpu)

#define RK__BACKEND_DECLARE(x) extern const rk__backend rk__backend_##x;
#define RK__BACKEND_ENTRY(x)   &rk__backend_##x,
RK__BACKEND_LIST(RK__BACKEND_DECLARE)

const rk__backend *const rk__backends[] = {
    RK__BACKEND_LIST(RK__BACKEND_ENTRY) NULL,
};

/* "cpu, cuda" into buf. */
static void
names(char *buf, size_t cap)
{
    size_t off = 0;

    buf[0] = '\0';
    for (size_t i = 0; rk__backends[i] != NULL && off < cap; i++) {
        int w = snprintf(buf + off, cap - off, "%s%s", i ? ", " : "",
            rk__backends[i]->name);
        if (w < 0)
            break;
        off += (size_t)w;
    }
}

static int
usable(const rk__backend *be)
{
    if (be->abi_version != RK__BACKEND_ABI)
        return rk__fail(RK_ENOTSUP, "backend '%s' has ABI %u, need %u",
            be->name, be->abi_version, RK__BACKEND_ABI);
    return be->probe != NULL ? be->probe() : RK_OK;
}

int
rk__backend_find_for(const char *name, uint32_t code, const rk__backend **out)
{
    char list[128], why[256];
    int rc;

    names(list, sizeof(list));
    if (name == NULL || strcmp(name, "auto") == 0) {
        for (size_t i = 0; rk__backends[i] != NULL; i++) {
            if ((rk__backends[i]->code & code) != 0
                && usable(rk__backends[i]) == RK_OK) {
                *out = rk__backends[i];
                return RK_OK;
            }
        }
        return rk__fail(
            RK_ENODEV, "no usable backend (built in: %s)", list);
    }
    for (size_t i = 0; rk__backends[i] != NULL; i++) {
        if (strcmp(rk__backends[i]->name, name) != 0)
            continue;
        if ((rc = usable(rk__backends[i])) != RK_OK) {
            snprintf(why, sizeof(why), "%s", rk_errdetail());
            return rk__fail(rc, "backend '%s' cannot run here: %s (built in: %s)",
                name, why, list);
        }
        *out = rk__backends[i];
        return RK_OK;
    }
    return rk__fail(RK_ENOTFOUND, "no backend '%s' (built in: %s)", name,
        list);
}

int
rk__backend_find(const char *name, const rk__backend **out)
{
    return rk__backend_find_for(name, RK__CODE_HOST | RK__CODE_DEVICE, out);
}

size_t
rk_backend_count(void)
{
    size_t n = 0;

    while (rk__backends[n] != NULL)
        n++;
    return n;
}

const char *
rk_backend_name(size_t i)
{
    return i < rk_backend_count() ? rk__backends[i]->name : NULL;
}

int
rk_backend_probe(const char *name)
{
    const rk__backend *be;

    return rk__backend_find(name, &be);
}
