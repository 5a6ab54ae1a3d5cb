/*
 * src/runtime/oneshots.c - one-shot kernels (ringkernel/oneshot.h): the
 * runtime's side. It checks definitions and launches, decides which
 * backend runs a kernel, and runs launches through that backend's exec
 * entries (backend.h); a started launch runs on a thread of its own and
 * completes a rk_oneshot_done.
 *
 * The decision: the definition's backend name ("auto"/NULL: the first
 * usable backend, best first, that runs one of the kernel's forms, so
 * CUDA C goes to cuda where it can run and the host fallback to cpu
 * elsewhere); a backend that runs neither of the kernel's forms is
 * refused (RK_ENOTSUP naming the kernel), as is one without exec.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "common/common.h"
#include "ringkernel/oneshot.h"

struct rk_oneshot {
    const rk__backend *be;
    rk_oneshot_def def; /* strings point past the struct, one allocation */
    rk__exec_kernel xk;
};

struct rk_oneshot_done {
    rk_oneshot *k;
    rk_oneshot_launch l; /* args and bufs point into the copies below */
    unsigned char args[RK_ONESHOT_ARG_MAX];
    rk_buffer *bufs[RK_ONESHOT_MAX_BUFS];
    pthread_t th;
    pthread_mutex_t lock;
    pthread_cond_t cond; /* CLOCK_MONOTONIC */
    int done, rc;        /* under lock */
    char detail[512];    /* the launch's error detail, under lock */
};

/* Copies s (if any) to *at and moves *at past it; returns the copy. */
static char *
copy_in(const char *s, char **at)
{
    char *d = *at;
    size_t n;

    if (s == NULL)
        return NULL;
    n = strlen(s) + 1;
    memcpy(d, s, n);
    *at += n;
    return d;
}

/* The kernel with its strings copied into the same allocation. */
static rk_oneshot *
oneshot_alloc(const rk_oneshot_def *def, const char *entry)
{
    const char *src[] = { def->name, def->source, entry, def->source_name };
    size_t bytes = sizeof(rk_oneshot);
    rk_oneshot *k;
    char *at;

    for (size_t i = 0; i < sizeof(src) / sizeof(src[0]); i++)
        bytes += src[i] != NULL ? strlen(src[i]) + 1 : 0;
    if ((k = calloc(1, bytes)) == NULL)
        return NULL;
    at = (char *)(k + 1);
    k->def = *def;
    k->def.name = copy_in(def->name, &at);
    k->def.source = copy_in(def->source, &at);
    k->def.entry = copy_in(entry, &at);
    k->def.source_name = copy_in(def->source_name, &at);
    return k;
}

int
rk_oneshot_create(const rk_oneshot_def *def, rk_oneshot **out)
{
    const rk__backend *be;
    rk_oneshot *k;
    uint32_t code;
    int rc;

    if (out == NULL || def == NULL)
        return rk__fail(RK_EINVAL, "rk_oneshot_create: def and out needed");
    *out = NULL;
    if (def->name == NULL || def->name[0] == '\0'
        || strlen(def->name) > RK_ID_MAX)
        return rk__fail(RK_EINVAL,
            "rk_oneshot_create: a kernel needs a name of 1 to %d bytes",
            RK_ID_MAX);
    code = (def->source != NULL ? RK__CODE_DEVICE : 0u)
        | (def->host != NULL ? RK__CODE_HOST : 0u);
    if (code == 0)
        return rk__fail(RK_EINVAL,
            "one-shot kernel '%s': neither CUDA C source nor a host "
            "fallback", def->name);
    if ((rc = rk__backend_find_for(def->backend, code, &be)) != RK_OK) {
        char why[400];
        snprintf(why, sizeof(why), "%s", rk_errdetail());
        return rk__fail(rc, "one-shot kernel '%s': %s", def->name, why);
    }
    if ((be->code & code) == 0)
        return rk__fail(RK_ENOTSUP,
            "one-shot kernel '%s': backend '%s' runs %s, and the kernel has "
            "%s only", def->name, be->name,
            be->code & RK__CODE_HOST ? "host code" : "device code",
            code & RK__CODE_HOST ? "a host fallback" : "CUDA C source (no "
                                                       "host fallback)");
    if (be->exec == NULL)
        return rk__fail(RK_ENOTSUP,
            "one-shot kernel '%s': backend '%s' runs no one-shot kernels",
            def->name, be->name);
    if ((k = oneshot_alloc(def, def->entry ? def->entry : def->name)) == NULL)
        return rk__fail(RK_ENOMEM, "one-shot kernel '%s': no memory",
            def->name);
    k->be = be;
    k->def.backend = be->name;
    k->xk.def = &k->def;
    k->xk.ordinal = -1;
    if (be->exec_load != NULL && (rc = be->exec_load(&k->xk)) != RK_OK) {
        free(k);
        return rc; /* the backend's detail names the kernel */
    }
    *out = k;
    return RK_OK;
}

void
rk_oneshot_destroy(rk_oneshot *k)
{
    if (k == NULL)
        return;
    if (k->be->exec_unload != NULL)
        k->be->exec_unload(&k->xk);
    free(k);
}

const char *
rk_oneshot_backend(const rk_oneshot *k)
{
    return k != NULL ? k->be->name : NULL;
}

int
rk_oneshot_device(const rk_oneshot *k)
{
    return k != NULL ? k->xk.ordinal : -1;
}

/* The launch's sizes, before anything runs. */
static int
check_launch(const rk_oneshot *k, const rk_oneshot_launch *l)
{
    if (l->grid == 0 || l->grid > 65535 || l->block == 0 || l->block > 1024)
        return rk__fail(RK_EINVAL,
            "one-shot kernel '%s': grid %u x block %u (1..65535 x 1..1024)",
            k->def.name, l->grid, l->block);
    if (l->args_len > RK_ONESHOT_ARG_MAX
        || (l->args_len > 0 && l->args == NULL))
        return rk__fail(RK_EINVAL,
            "one-shot kernel '%s': %zu bytes of arguments (at most %d, and "
            "not NULL)", k->def.name, l->args_len, RK_ONESHOT_ARG_MAX);
    if (l->nbuf > RK_ONESHOT_MAX_BUFS || (l->nbuf > 0 && l->bufs == NULL))
        return rk__fail(RK_EINVAL,
            "one-shot kernel '%s': %zu buffers (at most %d)", k->def.name,
            l->nbuf, RK_ONESHOT_MAX_BUFS);
    for (size_t i = 0; i < l->nbuf; i++)
        if (l->bufs[i] == NULL)
            return rk__fail(RK_EINVAL,
                "one-shot kernel '%s': buffer %zu is NULL", k->def.name, i);
    return RK_OK;
}

int
rk_oneshot_run(rk_oneshot *k, const rk_oneshot_launch *l)
{
    int rc;

    if (k == NULL || l == NULL)
        return rk__fail(RK_EINVAL, "rk_oneshot_run: kernel and launch needed");
    if ((rc = check_launch(k, l)) != RK_OK)
        return rc;
    return k->be->exec(&k->xk, l);
}

static void *
done_main(void *arg)
{
    rk_oneshot_done *d = arg;
    int rc = d->k->be->exec(&d->k->xk, &d->l);

    pthread_mutex_lock(&d->lock);
    d->rc = rc;
    if (rc != RK_OK)
        snprintf(d->detail, sizeof(d->detail), "%s", rk_errdetail());
    d->done = 1;
    pthread_cond_broadcast(&d->cond);
    pthread_mutex_unlock(&d->lock);
    return NULL;
}

int
rk_oneshot_start(
    rk_oneshot *k, const rk_oneshot_launch *l, rk_oneshot_done **out)
{
    rk_oneshot_done *d;
    int rc;

    if (k == NULL || l == NULL || out == NULL)
        return rk__fail(
            RK_EINVAL, "rk_oneshot_start: kernel, launch and out needed");
    *out = NULL;
    if ((rc = check_launch(k, l)) != RK_OK)
        return rc;
    if ((d = calloc(1, sizeof(*d))) == NULL)
        return rk__fail(RK_ENOMEM, "one-shot kernel '%s': no memory", k->def.name);
    d->k = k;
    d->l = *l;
    if (l->args_len > 0)
        memcpy(d->args, l->args, l->args_len);
    for (size_t i = 0; i < l->nbuf; i++)
        d->bufs[i] = l->bufs[i];
    d->l.args = d->args;
    d->l.bufs = d->bufs;
    pthread_mutex_init(&d->lock, NULL);
    rk__cond_init_mono(&d->cond);
    if (pthread_create(&d->th, NULL, done_main, d) != 0) {
        pthread_cond_destroy(&d->cond);
        pthread_mutex_destroy(&d->lock);
        free(d);
        return rk__fail(RK_ENOMEM,
            "one-shot kernel '%s': cannot start a thread", k->def.name);
    }
    *out = d;
    return RK_OK;
}

int
rk_oneshot_wait(rk_oneshot_done *d, int64_t timeout_ns)
{
    struct timespec at;
    int rc;

    if (d == NULL)
        return rk__fail(RK_EINVAL, "rk_oneshot_wait: no launch");
    if (timeout_ns > 0) {
        clock_gettime(CLOCK_MONOTONIC, &at);
        at.tv_sec += (time_t)(timeout_ns / 1000000000);
        at.tv_nsec += (long)(timeout_ns % 1000000000);
        if (at.tv_nsec >= 1000000000L) {
            at.tv_sec++;
            at.tv_nsec -= 1000000000L;
        }
    }
    pthread_mutex_lock(&d->lock);
    while (!d->done && timeout_ns != RK_NO_WAIT) {
        if (timeout_ns < 0)
            pthread_cond_wait(&d->cond, &d->lock);
        else if (pthread_cond_timedwait(&d->cond, &d->lock, &at) != 0)
            break;
    }
    if (!d->done) {
        pthread_mutex_unlock(&d->lock);
        return rk__fail(RK_ETIMEDOUT, "one-shot kernel '%s': still running",
            d->k->def.name);
    }
    rc = d->rc;
    if (rc != RK_OK)
        rk__fail(rc, "%s", d->detail);
    pthread_mutex_unlock(&d->lock);
    return rc;
}

void
rk_oneshot_done_free(rk_oneshot_done *d)
{
    if (d == NULL)
        return;
    (void)pthread_join(d->th, NULL);
    pthread_cond_destroy(&d->cond);
    pthread_mutex_destroy(&d->lock);
    free(d);
}

int
rk_ctx_execute_kernel(rk_ctx *ctx, rk_oneshot *k, const rk_oneshot_launch *l,
    rk_oneshot_done **done)
{
    if (ctx == NULL || k == NULL || l == NULL)
        return rk__fail(RK_EINVAL,
            "rk_ctx_execute_kernel: context, kernel and launch needed");
    return done != NULL ? rk_oneshot_start(k, l, done) : rk_oneshot_run(k, l);
}
