/*
 * libFuzzer: type registry look-ups by name and id with untrusted keys (a
 * wire "__type__" may hold any bytes, NULs included). Every type of
 * msg_types.c is registered once (but the one nested too deeply, which
 * registration refuses). A look-up by name finds a type only if
 * its name is exactly those bytes; by a NUL-terminated copy, only if the
 * name is the bytes before the first NUL; by id, only a type with that
 * id. A found type's name is compared in full, so a look-up that reads
 * past a registered name is caught by ASan.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz_support.h"
#include "msg_types.c"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

static void
register_all(void)
{
    static int done;

    if (done)
        return;
    done = 1;
    /* fz_d17 nests deeper than any registered type may: refused. */
    if (rk_msgtype_register(&fz_d17_msgtype) != RK_EINVAL)
        abort();
    for (size_t i = 0; i < FZ_NTYPES; i++)
        if (fz_types[i] != &fz_d17_msgtype
            && rk_msgtype_register(fz_types[i]) != RK_OK)
            abort();
    for (size_t i = 0; i < FZ_NFIXED; i++)
        if (fz_fixed_types[i] != &fz_d17_msgtype
            && rk_msgtype_register(fz_fixed_types[i]) != RK_OK)
            abort();
}

int
LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    const rk_msgtype *t;
    char *copy;
    uint32_t id = 0;

    register_all();
    /* A copy of exactly size bytes: ASan sees any read past it. */
    copy = malloc(size ? size : 1);
    memcpy(copy, data, size);
    t = rk_msgtype_by_name_n(copy, size);
    if (t != NULL
        && (strlen(t->name) != size || memcmp(t->name, copy, size) != 0))
        abort();
    free(copy);
    copy = malloc(size + 1);
    memcpy(copy, data, size);
    copy[size] = '\0';
    t = rk_msgtype_by_name(copy);
    if (t != NULL && strcmp(t->name, copy) != 0)
        abort();
    if (t == NULL && size > 0 && strlen(copy) == size) {
        /* Not found by name: no registered type may be called that. */
        for (size_t i = 0; i < FZ_NTYPES; i++)
            if (fz_types[i] != &fz_d17_msgtype
                && strcmp(fz_types[i]->name, copy) == 0)
                abort();
    }
    free(copy);
    memcpy(&id, data, size < 4 ? size : 4);
    t = rk_msgtype_by_id(id);
    if (t != NULL && t->id != id)
        abort();
    return 0;
}
