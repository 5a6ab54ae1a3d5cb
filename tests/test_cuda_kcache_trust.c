/*
 * The compiled-kernel cache trusts an on-disk entry only as OpenSSH's
 * StrictModes trusts a key file (issue 27, item 4): a regular file, owned
 * by this user, not writable by group or others, in a directory owned by
 * this user (or root) and not writable by group or others. Each test
 * plants a forged entry (a valid header, key, length and checksum for
 * another image: exactly what the cache itself writes) and checks that a
 * fresh cache, which cannot have it in memory, reports a miss instead of
 * loading it, logs why once, and does not replace what it does not own.
 * A FIFO at an entry's path must not block the lookup, and a cache write
 * that fails must close its descriptor and remove its temporary file.
 *
 * The "owned by another user" cases chown to nobody (65534) and need root;
 * without it they skip and say so.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backend/cuda/kcache.h"
#include "cuda_helpers.h"
#include "ringkernel/ringkernel.h"

#define NOBODY 65534

static char tmpdir[256];

/* ------------------------------------------------------------ logging */

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static int log_count;
static char log_last[512];

static void
on_log(rk_log_level level, const char *msg, void *user)
{
    (void)user;
    if (level < RK_LOG_WARN || strstr(msg, "kernel cache") == NULL)
        return;
    pthread_mutex_lock(&log_lock);
    log_count++;
    snprintf(log_last, sizeof(log_last), "%s", msg);
    pthread_mutex_unlock(&log_lock);
}

static int
logs_seen(char *last, size_t cap)
{
    int n;
    pthread_mutex_lock(&log_lock);
    n = log_count;
    log_count = 0;
    if (last != NULL)
        snprintf(last, cap, "%s", log_last);
    log_last[0] = '\0';
    pthread_mutex_unlock(&log_lock);
    return n;
}

/* ------------------------------------------------------------ fixture */

static int
setup(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/rk-kctrust-XXXXXX");
    if (mkdtemp(tmpdir) == NULL)
        return -1;
    rk_set_log(on_log, NULL);
    (void)logs_seen(NULL, 0);
    return 0;
}

static int
teardown(void **state)
{
    char cmd[600];
    (void)state;
    rk_set_log(NULL, NULL);
    snprintf(
        cmd, sizeof(cmd), "chmod -R u+rwx '%s'; rm -rf '%s'", tmpdir, tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static rk__nvrtc_image
image(size_t n, unsigned char seed)
{
    return cuda_test_image(n, seed, 13, RK__IMG_PTX);
}

static rk__kkey
key_of(const char *source)
{
    rk__nvrtc_src s = { .name = "k.cu", .source = source, .cc = 90 };
    rk__kkey k;
    assert_int_equal(rk__kcache_key(&s, 13, 0, 90, RK__IMG_PTX, &k), RK_OK);
    return k;
}

static rk__kcache *
open_cache(const char *dir)
{
    rk__kcache_cfg cfg = { .dir = dir };
    rk__kcache *c;
    assert_int_equal(rk__kcache_open(&c, &cfg), RK_OK);
    assert_non_null(rk__kcache_dir(c));
    return c;
}

/* Writes a forged entry for k under dir (through the cache itself, so
 * header, key, length and checksum are all valid), then returns its path
 * in path. The directory is this user's and 0700 while it is written. */
static rk__nvrtc_image
plant(const char *dir, const rk__kkey *k, char *path, size_t cap)
{
    rk__nvrtc_image forged = image(300, 0x66);
    rk__kcache *c = open_cache(dir);

    assert_int_equal(rk__kcache_put(c, k, &forged), RK_OK);
    rk__kcache_path(c, k, path, cap);
    rk__kcache_close(c);
    return forged;
}

/* A fresh cache on dir looks k up: returns what rk__kcache_get said,
 * and checks that a miss handed back no image. */
static int
lookup(const char *dir, const rk__kkey *k, rk__kcache_stats *st)
{
    rk__kcache *c = open_cache(dir);
    rk__nvrtc_image got = { 0 };
    int how = rk__kcache_get(c, k, &got);

    if (how == RK__KC_MISS)
        assert_null(got.data);
    rk__nvrtc_image_free(&got);
    if (st != NULL)
        rk__kcache_stats_get(c, st);
    rk__kcache_close(c);
    return how;
}

static void
file_holds(const char *path, const rk__nvrtc_image *img)
{
    unsigned char buf[1024];
    FILE *f = fopen(path, "rb");
    size_t n;

    assert_non_null(f);
    n = fread(buf, 1, sizeof(buf), f);
    fclose(f);
    assert_int_equal(n, 64 + img->size);
    assert_memory_equal(buf + 64, img->data, img->size);
}

/* Gives path to uid 65534; false, saying why, where this process may
 * not (not root, or a user namespace without that uid): the caller frees
 * what it holds and skips. */
static bool
give_away(const char *path)
{
    if (geteuid() == 0 && chown(path, NOBODY, NOBODY) == 0)
        return true;
    print_message("skipped: cannot give %s to another user (uid %d): %s "
                  "(this process is uid %u; the test needs root)\n",
        path, NOBODY, geteuid() == 0 ? strerror(errno) : "not root",
        (unsigned)geteuid());
    return false;
}

/* ------------------------------------------------------------ tests */

/* The control: a trusted entry is a disk hit, and no warning is logged. */
static void
test_trusted_entry_hits(void **state)
{
    char dir[300], path[400];
    rk__kkey k = key_of("trusted");
    rk__nvrtc_image img;
    (void)state;

    snprintf(dir, sizeof(dir), "%s/ok", tmpdir);
    img = plant(dir, &k, path, sizeof(path));
    assert_int_equal(lookup(dir, &k, NULL), RK__KC_DISK);
    assert_int_equal(logs_seen(NULL, 0), 0);
    rk__nvrtc_image_free(&img);
}

/* Created directories are 0700 whatever the umask. */
static void
test_dirs_created_private(void **state)
{
    char dir[300];
    struct stat sb;
    mode_t old = umask(0);
    rk__kcache *c;
    (void)state;

    snprintf(dir, sizeof(dir), "%s/p/q/r", tmpdir);
    c = open_cache(dir);
    umask(old);
    assert_int_equal(stat(dir, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0700);
    snprintf(dir, sizeof(dir), "%s/p", tmpdir);
    assert_int_equal(stat(dir, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0700);
    rk__kcache_close(c);
}

/* A directory anyone can write to: nothing in it is trusted, and the
 * cache writes nothing into it either. */
static void
test_world_writable_dir_refused(void **state)
{
    char dir[300], path[400], last[512];
    rk__kkey k = key_of("dir-0777");
    rk__nvrtc_image forged, mine = image(200, 0x11);
    rk__kcache_stats st;
    rk__kcache *c;
    (void)state;

    snprintf(dir, sizeof(dir), "%s/shared", tmpdir);
    forged = plant(dir, &k, path, sizeof(path));
    assert_int_equal(chmod(dir, 0777), 0);
    assert_int_equal(lookup(dir, &k, &st), RK__KC_MISS);
    assert_int_equal(st.untrusted, 1);
    assert_int_equal(logs_seen(last, sizeof(last)), 1);
    assert_non_null(strstr(last, "writable"));
    /* Group-writable is refused too (as StrictModes does). */
    assert_int_equal(chmod(dir, 0770), 0);
    assert_int_equal(lookup(dir, &k, NULL), RK__KC_MISS);
    (void)logs_seen(NULL, 0);

    /* Once per cache: a second lookup in the same cache logs nothing
     * more; a put leaves the planted entry alone. */
    assert_int_equal(chmod(dir, 0777), 0);
    c = open_cache(dir);
    for (int i = 0; i < 3; i++) {
        rk__nvrtc_image got = { 0 };
        assert_int_equal(rk__kcache_get(c, &k, &got), RK__KC_MISS);
    }
    assert_int_equal(logs_seen(NULL, 0), 1);
    assert_int_not_equal(rk__kcache_put(c, &k, &mine), RK_OK);
    file_holds(path, &forged);
    rk__kcache_close(c);
    rk__nvrtc_image_free(&forged);
    rk__nvrtc_image_free(&mine);
}

/* An entry anyone can write to is not loaded; the recompiled image
 * replaces it (it is this user's file in this user's directory). */
static void
test_world_writable_entry_refused(void **state)
{
    char dir[300], path[400], last[512];
    rk__kkey k = key_of("entry-0666");
    rk__nvrtc_image forged, mine = image(200, 0x22);
    struct stat sb;
    rk__kcache *c;
    (void)state;

    snprintf(dir, sizeof(dir), "%s/e", tmpdir);
    forged = plant(dir, &k, path, sizeof(path));
    assert_int_equal(chmod(path, 0666), 0);
    assert_int_equal(lookup(dir, &k, NULL), RK__KC_MISS);
    assert_int_equal(logs_seen(last, sizeof(last)), 1);
    assert_non_null(strstr(last, "writable"));
    assert_int_equal(chmod(path, 0620), 0);
    assert_int_equal(lookup(dir, &k, NULL), RK__KC_MISS);
    (void)logs_seen(NULL, 0);

    c = open_cache(dir);
    assert_int_equal(rk__kcache_put(c, &k, &mine), RK_OK);
    rk__kcache_close(c);
    file_holds(path, &mine);
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal(sb.st_mode & 022, 0);
    assert_int_equal(lookup(dir, &k, NULL), RK__KC_DISK);
    rk__nvrtc_image_free(&forged);
    rk__nvrtc_image_free(&mine);
}

/* A symbolic link at an entry's path is not followed. */
static void
test_symlink_entry_refused(void **state)
{
    char dir[300], path[400], other[400];
    rk__kkey k = key_of("symlink"), k2 = key_of("symlink-target");
    rk__nvrtc_image forged;
    (void)state;

    snprintf(dir, sizeof(dir), "%s/l", tmpdir);
    forged = plant(dir, &k2, other, sizeof(other));
    rk__nvrtc_image_free(&forged);
    forged = plant(dir, &k, path, sizeof(path));
    /* The link points at a valid entry for k (moved aside). */
    assert_int_equal(rename(path, other), 0);
    assert_int_equal(symlink(other, path), 0);
    assert_int_equal(lookup(dir, &k, NULL), RK__KC_MISS);
    assert_int_equal(logs_seen(NULL, 0), 1);
    rk__nvrtc_image_free(&forged);
}

/* An entry owned by another user is neither loaded nor replaced. */
static void
test_foreign_entry_refused(void **state)
{
    char dir[300], path[400], last[512];
    rk__kkey k = key_of("foreign-entry");
    rk__nvrtc_image forged, mine = image(200, 0x33);
    struct stat sb;
    rk__kcache *c;
    (void)state;

    snprintf(dir, sizeof(dir), "%s/f", tmpdir);
    forged = plant(dir, &k, path, sizeof(path));
    if (!give_away(path)) {
        rk__nvrtc_image_free(&forged);
        rk__nvrtc_image_free(&mine);
        skip();
    }
    assert_int_equal(lookup(dir, &k, NULL), RK__KC_MISS);
    assert_int_equal(logs_seen(last, sizeof(last)), 1);
    assert_non_null(strstr(last, "owned by"));

    c = open_cache(dir);
    assert_int_not_equal(rk__kcache_put(c, &k, &mine), RK_OK);
    rk__kcache_close(c);
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal(sb.st_uid, NOBODY);
    file_holds(path, &forged);
    rk__nvrtc_image_free(&forged);
    rk__nvrtc_image_free(&mine);
}

/* A directory owned by another user (not root) is not trusted. */
static void
test_foreign_dir_refused(void **state)
{
    char dir[300], path[400], last[512];
    rk__kkey k = key_of("foreign-dir");
    rk__nvrtc_image forged;
    (void)state;

    snprintf(dir, sizeof(dir), "%s/g", tmpdir);
    forged = plant(dir, &k, path, sizeof(path));
    if (!give_away(dir)) {
        rk__nvrtc_image_free(&forged);
        skip();
    }
    assert_int_equal(lookup(dir, &k, NULL), RK__KC_MISS);
    assert_int_equal(logs_seen(last, sizeof(last)), 1);
    assert_non_null(strstr(last, "owned by"));
    file_holds(path, &forged);
    rk__nvrtc_image_free(&forged);
}

/* A FIFO at an entry's path: the lookup must come back (a miss) rather
 * than block in open(). The lookup runs in a thread; if it has not come
 * back by a generous deadline, the test opens the FIFO's other end to
 * free it, and fails. */
typedef struct fifo_job {
    const char *dir;
    rk__kkey key;
    int how;
    bool done;
    pthread_mutex_t lock;
    pthread_cond_t cv;
} fifo_job;

static void *
fifo_lookup(void *arg)
{
    fifo_job *j = arg;
    int how = lookup(j->dir, &j->key, NULL);
    pthread_mutex_lock(&j->lock);
    j->how = how;
    j->done = true;
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->lock);
    return NULL;
}

static void
test_fifo_entry_does_not_block(void **state)
{
    char dir[300], path[400];
    fifo_job j = { .lock = PTHREAD_MUTEX_INITIALIZER };
    rk__nvrtc_image forged, mine = image(200, 0x44);
    struct timespec dl;
    pthread_condattr_t ca;
    pthread_t t;
    rk__kcache *c;
    bool done;
    (void)state;

    snprintf(dir, sizeof(dir), "%s/fifo", tmpdir);
    j.key = key_of("fifo");
    j.dir = dir;
    forged = plant(dir, &j.key, path, sizeof(path));
    assert_int_equal(unlink(path), 0);
    assert_int_equal(mkfifo(path, 0600), 0);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&j.cv, &ca);
    pthread_condattr_destroy(&ca);
    assert_int_equal(pthread_create(&t, NULL, fifo_lookup, &j), 0);
    clock_gettime(CLOCK_MONOTONIC, &dl);
    dl.tv_sec += 20;
    pthread_mutex_lock(&j.lock);
    while (!j.done
        && pthread_cond_timedwait(&j.cv, &j.lock, &dl) != ETIMEDOUT) { }
    done = j.done;
    pthread_mutex_unlock(&j.lock);
    if (!done) {
        /* Blocked in open(): a writer frees it (it then reads EOF). */
        int w = open(path, O_WRONLY | O_NONBLOCK);
        if (w >= 0)
            close(w);
    }
    pthread_join(t, NULL);
    pthread_cond_destroy(&j.cv);
    assert_true(done);
    assert_int_equal(j.how, RK__KC_MISS);
    assert_int_equal(logs_seen(NULL, 0), 1);
    /* The FIFO is this user's: the compiled image replaces it. */
    c = open_cache(dir);
    assert_int_equal(rk__kcache_put(c, &j.key, &mine), RK_OK);
    rk__kcache_close(c);
    file_holds(path, &mine);
    rk__nvrtc_image_free(&forged);
    rk__nvrtc_image_free(&mine);
}

static int
count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    int n = 0;

    assert_non_null(d);
    while ((e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static int
count_temps(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;

    assert_non_null(d);
    while ((e = readdir(d)) != NULL)
        n += strncmp(e->d_name, ".tmp", 4) == 0;
    closedir(d);
    return n;
}

/* A write that fails part-way (the file size limit, EFBIG) closes its
 * descriptor and removes its temporary file. */
static void
test_failed_write_closes(void **state)
{
    char dir[300], path[400];
    rk__kkey k = key_of("efbig");
    rk__nvrtc_image big = image(4096, 0x55);
    struct rlimit old, lim;
    struct sigaction ign = { .sa_handler = SIG_IGN }, was;
    rk__kcache_stats st;
    rk__kcache *c;
    int before, after;
    (void)state;

    snprintf(dir, sizeof(dir), "%s/w", tmpdir);
    c = open_cache(dir);
    rk__kcache_path(c, &k, path, sizeof(path));
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    lim = old;
    lim.rlim_cur = 1000;
    assert_int_equal(sigaction(SIGXFSZ, &ign, &was), 0);
    before = count_fds();
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    for (int i = 0; i < 3; i++)
        assert_int_not_equal(rk__kcache_put(c, &k, &big), RK_OK);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    after = count_fds();
    assert_int_equal(sigaction(SIGXFSZ, &was, NULL), 0);
    assert_int_equal(after, before);
    assert_int_equal(count_temps(dir), 0);
    assert_int_equal(access(path, F_OK), -1);
    rk__kcache_stats_get(c, &st);
    assert_int_equal(st.write_errors, 3);
    rk__kcache_close(c);
    rk__nvrtc_image_free(&big);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            test_trusted_entry_hits, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_dirs_created_private, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_world_writable_dir_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_world_writable_entry_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_symlink_entry_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_foreign_entry_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_foreign_dir_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_fifo_entry_does_not_block, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_failed_write_closes, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
