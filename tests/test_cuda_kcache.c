/*
 * The compiled-kernel cache (src/backend/cuda/kcache.c): miss then hit,
 * the disk behind a fresh process-level cache, keys that differ when
 * anything that decides the image differs, corrupt and truncated entries
 * detected and rebuilt, concurrent writers and readers of one key, the
 * XDG default directory, and a compile through the cache with NVRTC
 * (skipped without NVRTC).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/cuda/kcache.h"
#include "cuda_helpers.h"
#include "ringkernel/ringkernel.h"

static char tmpdir[256];

static int
setup(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/rk-kcache-XXXXXX");
    return mkdtemp(tmpdir) == NULL ? -1 : 0;
}

static int
teardown(void **state)
{
    char cmd[300];
    (void)state;
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static void
subdir(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", tmpdir, name);
}

static rk__nvrtc_image
fake_image(size_t n, unsigned char seed)
{
    return cuda_test_image(n, seed, 7, RK__IMG_CUBIN);
}

static rk__kkey
key_of(const char *source, const char *opt)
{
    rk__nvrtc_src s = { .name = "k.cu", .source = source, .cc = 90 };
    const char *opts[1] = { opt };
    rk__kkey k;
    s.opts = opts;
    s.nopts = opt ? 1 : 0;
    assert_int_equal(rk__kcache_key(&s, 13, 0, 90, RK__IMG_CUBIN, &k), RK_OK);
    return k;
}

static void
test_keys_differ(void **state)
{
    rk__nvrtc_src s = { .name = "k.cu", .source = "a", .cc = 90 };
    rk__kkey a, b;
    (void)state;

    a = key_of("int x;", NULL);
    b = key_of("int x;", NULL);
    assert_memory_equal(&a, &b, sizeof(a));
    b = key_of("int y;", NULL);
    assert_memory_not_equal(&a, &b, sizeof(a));
    b = key_of("int x;", "-DFOO");
    assert_memory_not_equal(&a, &b, sizeof(a));
    assert_int_equal(rk__kcache_key(&s, 13, 0, 90, RK__IMG_CUBIN, &a), RK_OK);
    assert_int_equal(rk__kcache_key(&s, 13, 1, 90, RK__IMG_CUBIN, &b), RK_OK);
    assert_memory_not_equal(&a, &b, sizeof(a)); /* NVRTC version */
    assert_int_equal(rk__kcache_key(&s, 13, 0, 80, RK__IMG_CUBIN, &b), RK_OK);
    assert_memory_not_equal(&a, &b, sizeof(a)); /* architecture */
    assert_int_equal(rk__kcache_key(&s, 13, 0, 90, RK__IMG_PTX, &b), RK_OK);
    assert_memory_not_equal(&a, &b, sizeof(a)); /* image kind */
}

static void
test_miss_then_hits(void **state)
{
    rk__kcache_cfg cfg = { 0 };
    rk__kcache *c, *c2;
    rk__nvrtc_image img = fake_image(1000, 3), got;
    rk__kkey k = key_of("miss-then-hit", NULL);
    rk__kcache_stats st;
    char dir[300];
    (void)state;

    subdir(dir, sizeof(dir), "a/b/c");
    cfg.dir = dir;
    assert_int_equal(rk__kcache_open(&c, &cfg), RK_OK);
    assert_string_equal(rk__kcache_dir(c), dir);
    assert_int_equal(rk__kcache_get(c, &k, &got), RK__KC_MISS);
    assert_int_equal(rk__kcache_put(c, &k, &img), RK_OK);
    assert_int_equal(rk__kcache_get(c, &k, &got), RK__KC_MEM);
    assert_int_equal(got.size, img.size);
    assert_memory_equal(got.data, img.data, img.size);
    assert_int_equal(got.kind, RK__IMG_CUBIN);
    assert_int_equal(got.arch, 90);
    rk__nvrtc_image_free(&got);
    rk__kcache_stats_get(c, &st);
    assert_int_equal(st.misses, 1);
    assert_int_equal(st.mem_hits, 1);
    assert_int_equal(st.writes, 1);

    /* A second cache on the same directory (a new process) hits disk,
     * then memory. */
    assert_int_equal(rk__kcache_open(&c2, &cfg), RK_OK);
    assert_int_equal(rk__kcache_get(c2, &k, &got), RK__KC_DISK);
    assert_memory_equal(got.data, img.data, img.size);
    rk__nvrtc_image_free(&got);
    assert_int_equal(rk__kcache_get(c2, &k, &got), RK__KC_MEM);
    rk__nvrtc_image_free(&got);
    rk__kcache_close(c2);
    rk__kcache_close(c);
    rk__nvrtc_image_free(&img);
}

/* The LRU keeps the most recently used entries. */
static void
test_lru_evicts_oldest(void **state)
{
    rk__kcache_cfg cfg = { .lru_entries = 2, .disk_off = 1 };
    rk__kcache *c;
    rk__nvrtc_image img = fake_image(10, 1), got;
    rk__kkey k1 = key_of("1", NULL), k2 = key_of("2", NULL),
             k3 = key_of("3", NULL);
    (void)state;

    assert_int_equal(rk__kcache_open(&c, &cfg), RK_OK);
    assert_null(rk__kcache_dir(c));
    assert_int_equal(rk__kcache_put(c, &k1, &img), RK_OK);
    assert_int_equal(rk__kcache_put(c, &k2, &img), RK_OK);
    assert_int_equal(rk__kcache_get(c, &k1, &got), RK__KC_MEM); /* k1 new */
    rk__nvrtc_image_free(&got);
    assert_int_equal(rk__kcache_put(c, &k3, &img), RK_OK); /* evicts k2 */
    assert_int_equal(rk__kcache_get(c, &k2, &got), RK__KC_MISS);
    assert_int_equal(rk__kcache_get(c, &k1, &got), RK__KC_MEM);
    rk__nvrtc_image_free(&got);
    assert_int_equal(rk__kcache_get(c, &k3, &got), RK__KC_MEM);
    rk__nvrtc_image_free(&got);
    rk__kcache_close(c);
    rk__nvrtc_image_free(&img);
}

/* Damages key's file with `how` and checks a fresh cache calls it corrupt
 * (a miss), and that a put repairs it. */
static void
check_damage(const char *name, void (*damage)(const char *path))
{
    rk__kcache_cfg cfg = { 0 };
    rk__kcache *c;
    rk__nvrtc_image img = fake_image(4096, 9), got;
    rk__kkey k = key_of(name, NULL);
    rk__kcache_stats st;
    char dir[300], path[1200];

    subdir(dir, sizeof(dir), name);
    cfg.dir = dir;
    assert_int_equal(rk__kcache_open(&c, &cfg), RK_OK);
    assert_int_equal(rk__kcache_put(c, &k, &img), RK_OK);
    rk__kcache_path(c, &k, path, sizeof(path));
    rk__kcache_close(c);
    damage(path);

    assert_int_equal(rk__kcache_open(&c, &cfg), RK_OK);
    assert_int_equal(rk__kcache_get(c, &k, &got), RK__KC_MISS);
    rk__kcache_stats_get(c, &st);
    assert_int_equal(st.corrupt, 1);
    assert_int_equal(rk__kcache_put(c, &k, &img), RK_OK); /* rebuild */
    rk__kcache_close(c);

    assert_int_equal(rk__kcache_open(&c, &cfg), RK_OK);
    assert_int_equal(rk__kcache_get(c, &k, &got), RK__KC_DISK);
    assert_memory_equal(got.data, img.data, img.size);
    rk__nvrtc_image_free(&got);
    rk__kcache_close(c);
    rk__nvrtc_image_free(&img);
}

static void
truncate_half(const char *path)
{
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal(truncate(path, sb.st_size / 2), 0);
}

static void
flip_image_byte(const char *path)
{
    FILE *f = fopen(path, "r+b");
    int ch;
    assert_non_null(f);
    fseek(f, 64 + 100, SEEK_SET);
    ch = fgetc(f);
    fseek(f, 64 + 100, SEEK_SET);
    fputc(ch ^ 0x40, f);
    fclose(f);
}

static void
clobber_header(const char *path)
{
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    fputs("NOTACACHE", f);
    fclose(f);
}

static void
empty_file(const char *path)
{
    assert_int_equal(truncate(path, 0), 0);
}

static void
test_corrupt_entries_rebuilt(void **state)
{
    (void)state;
    check_damage("truncated", truncate_half);
    check_damage("flipped", flip_image_byte);
    check_damage("header", clobber_header);
    check_damage("empty", empty_file);
}

/* Writers of one key and readers with fresh caches: a reader sees no file
 * or a complete one, never a partial one (rename is atomic). */
#define NWRITERS 3
#define NROUNDS  40

static char race_dir[300];
static rk__kkey race_key;
static rk__nvrtc_image race_img;

static void *
race_writer(void *arg)
{
    rk__kcache_cfg cfg = { .dir = race_dir, .lru_entries = 1 };
    rk__kcache *c;
    (void)arg;
    if (rk__kcache_open(&c, &cfg) != RK_OK)
        return (void *)1;
    for (int i = 0; i < NROUNDS; i++)
        if (rk__kcache_put(c, &race_key, &race_img) != RK_OK)
            return (void *)1;
    rk__kcache_close(c);
    return NULL;
}

static void
test_concurrent_writers(void **state)
{
    pthread_t th[NWRITERS];
    rk__kcache_cfg cfg = { .dir = race_dir };
    int hits = 0;
    (void)state;

    subdir(race_dir, sizeof(race_dir), "race");
    race_key = key_of("race", NULL);
    race_img = fake_image(256 * 1024, 5);
    for (int i = 0; i < NWRITERS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, race_writer, NULL), 0);
    for (int r = 0; r < NROUNDS * 2; r++) {
        rk__kcache *c;
        rk__nvrtc_image got;
        rk__kcache_stats st;
        int how;
        assert_int_equal(rk__kcache_open(&c, &cfg), RK_OK);
        how = rk__kcache_get(c, &race_key, &got);
        rk__kcache_stats_get(c, &st);
        assert_int_equal(st.corrupt, 0);
        if (how == RK__KC_DISK) {
            hits++;
            assert_int_equal(got.size, race_img.size);
            assert_memory_equal(got.data, race_img.data, race_img.size);
            rk__nvrtc_image_free(&got);
        }
        rk__kcache_close(c);
    }
    for (int i = 0; i < NWRITERS; i++) {
        void *ret;
        pthread_join(th[i], &ret);
        assert_null(ret);
    }
    print_message("concurrent readers: %d of %d hit\n", hits, NROUNDS * 2);
    /* No temporary files left behind. */
    char cmd[400];
    snprintf(cmd, sizeof(cmd), "ls -A '%s' | grep -q '^\\.tmp-'", race_dir);
    assert_int_not_equal(system(cmd), 0);
    rk__nvrtc_image_free(&race_img);
}

static void
test_xdg_default_dir(void **state)
{
    rk__kcache *c;
    char want[400];
    (void)state;
    setenv("XDG_CACHE_HOME", tmpdir, 1);
    assert_int_equal(rk__kcache_open(&c, NULL), RK_OK);
    snprintf(want, sizeof(want), "%s/ringkernel/kernels", tmpdir);
    assert_string_equal(rk__kcache_dir(c), want);
    rk__kcache_close(c);
    unsetenv("XDG_CACHE_HOME");
}

/* Through NVRTC: the second compile of the same source is a hit, and the
 * image is the same bytes. */
static void
test_compile_through_cache(void **state)
{
    static const char src[] = "RK_DEV_HANDLER(h)(rk_dev_ctx *x, "
                              "const rk_dev_msg *m) { return "
                              "rk_dev_send(x, 2, m->data, m->len); }\n"
                              "RK_DEV_KERNEL(cached_kernel, h)\n";
    rk__nvrtc_src s = { .name = "c.cu", .source = src, .cc = 90 };
    rk__kcache_cfg cfg = { 0 };
    rk__kcache *c;
    rk__nvrtc_image a, b;
    int how, major, minor;
    char dir[300];
    (void)state;

    if (rk__nvrtc_version(&major, &minor) != RK_OK) {
        print_message("NVRTC not available: %s\n", rk_errdetail());
        skip();
    }
    subdir(dir, sizeof(dir), "nvrtc");
    cfg.dir = dir;
    assert_int_equal(rk__kcache_open(&c, &cfg), RK_OK);
    assert_int_equal(rk__kcache_compile(c, &s, &a, &how), RK_OK);
    assert_int_equal(how, RK__KC_MISS);
    assert_int_equal(rk__kcache_compile(c, &s, &b, &how), RK_OK);
    assert_int_equal(how, RK__KC_MEM);
    assert_int_equal(a.size, b.size);
    assert_memory_equal(a.data, b.data, a.size);
    rk__nvrtc_image_free(&b);
    rk__kcache_close(c);
    assert_int_equal(rk__kcache_open(&c, &cfg), RK_OK);
    assert_int_equal(rk__kcache_compile(c, &s, &b, &how), RK_OK);
    assert_int_equal(how, RK__KC_DISK);
    assert_memory_equal(a.data, b.data, a.size);
    rk__nvrtc_image_free(&a);
    rk__nvrtc_image_free(&b);
    /* A compile error is not cached. */
    s.source = "this is not C";
    assert_int_equal(rk__kcache_compile(c, &s, &a, &how), RK_ECOMPILE);
    rk__nvrtc_image_free(&a);
    assert_int_equal(rk__kcache_compile(c, &s, &a, &how), RK_ECOMPILE);
    rk__nvrtc_image_free(&a);
    rk__kcache_close(c);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keys_differ),
        cmocka_unit_test(test_miss_then_hits),
        cmocka_unit_test(test_lru_evicts_oldest),
        cmocka_unit_test(test_corrupt_entries_rebuilt),
        cmocka_unit_test(test_concurrent_writers),
        cmocka_unit_test(test_xdg_default_dir),
        cmocka_unit_test(test_compile_through_cache),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
