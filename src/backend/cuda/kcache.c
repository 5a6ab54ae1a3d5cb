/*
 * src/backend/cuda/kcache.c - compiled-kernel cache (see kcache.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/cuda/kcache.h"
#include "common/common.h"
#include "ringkernel/version.h"

#define KC_MAGIC     "RKKCACHE"
#define KC_FORMAT    1u
#define KC_HEADER    64u
#define KC_MAX_IMAGE (256u << 20)
#define KC_DEF_LRU   32u
#define KC_PATH_MAX  1024

typedef struct kc_entry {
    rk__kkey key;
    rk__nvrtc_image img; /* data only */
    uint64_t used;       /* LRU stamp; 0: empty */
} kc_entry;

struct rk__kcache {
    pthread_mutex_t lock;
    kc_entry *lru;
    uint32_t nlru;
    uint64_t clock;
    rk__kcache_stats st;
    char dir[KC_PATH_MAX];
    int has_dir;
    unsigned warned; /* KC_WHY_* bits already logged (once per cache) */
};

/* ------------------------------------------------------------ hashing */

typedef unsigned __int128 u128;

/* FNV-1a, 128-bit: offset basis and prime from the FNV specification. */
static u128
fnv128_init(void)
{
    return ((u128)0x6c62272e07bb0142ull << 64) | 0x62b821756295c58dull;
}

static u128
fnv128(u128 h, const void *p, size_t n)
{
    const u128 prime = ((u128)0x0000000001000000ull << 64) | 0x13bull;
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= prime;
    }
    return h;
}

/* Hashes a field with its length, so ("ab","c") and ("a","bc") differ. */
static u128
fnv128_field(u128 h, const void *p, size_t n)
{
    uint64_t len = n;
    h = fnv128(h, &len, sizeof(len));
    return fnv128(h, p, n);
}

static uint64_t
fnv64(const void *p, size_t n)
{
    const unsigned char *s = p;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* Reads the whole of the open regular file fd (at most max bytes) into a
 * malloc'd buffer, and closes fd whatever happens. */
static int
read_fd(int fd, size_t max, unsigned char **out, size_t *len)
{
    struct stat sb;
    unsigned char *buf;
    size_t got = 0;

    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size < 0
        || (size_t)sb.st_size > max
        || (buf = malloc((size_t)sb.st_size + 1)) == NULL) {
        close(fd);
        return -1;
    }
    while (got < (size_t)sb.st_size) {
        ssize_t r = read(fd, buf + got, (size_t)sb.st_size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    *out = buf;
    *len = got;
    return 0;
}

/* Reads a whole regular file (at most max bytes) into a malloc'd buffer.
 * O_NONBLOCK: a FIFO or device at path must not block the open. */
static int
read_file(const char *path, size_t max, unsigned char **out, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);

    if (fd < 0)
        return -1;
    return read_fd(fd, max, out, len);
}

int
rk__kcache_key(const rk__nvrtc_src *src, int nv_major, int nv_minor, int arch,
    int kind, rk__kkey *key)
{
    const char *inc = rk__nvrtc_include_dir(src);
    char *full = rk__nvrtc_full_source(src);
    int32_t meta[6] = { nv_major, nv_minor, arch, kind, RK_VERSION_MAJOR,
        RK_VERSION_MINOR };
    char path[KC_PATH_MAX + 64];
    u128 h = fnv128_init();

    if (full == NULL)
        return rk__fail(RK_ENOMEM, "no memory for the cache key");
    h = fnv128_field(h, full, strlen(full));
    free(full);
    h = fnv128_field(h, meta, sizeof(meta));
    for (size_t i = 0; i < src->nopts; i++)
        h = fnv128_field(h, src->opts[i], strlen(src->opts[i]));
    /* The device headers the source includes: the embedded copies, or
     * the files of the include directory in use (same names). */
    for (size_t i = 0; i < rk__dev_header_count; i++) {
        unsigned char *buf = NULL;
        size_t n = 0;
        if (inc == NULL) {
            h = fnv128_field(
                h, rk__dev_header_texts[i], strlen(rk__dev_header_texts[i]));
            continue;
        }
        snprintf(path, sizeof(path), "%s/%s", inc, rk__dev_header_names[i]);
        if (read_file(path, 1u << 22, &buf, &n) == 0) {
            h = fnv128_field(h, buf, n);
            free(buf);
        } else {
            h = fnv128_field(h, "", 0); /* NVRTC will report it missing */
        }
    }
    h = fnv128_field(h, inc ? inc : "", inc ? strlen(inc) : 0);
    if (src->link_ptx != NULL) /* linked code: both inputs decide */
        h = fnv128_field(h, src->link_ptx, src->link_ptx_size);
    for (int i = 0; i < 16; i++)
        key->b[i] = (uint8_t)(h >> (8 * i));
    return RK_OK;
}

/* ------------------------------------------------------------ setup */

static int
mkdirs(char *path)
{
    for (char *p = path + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(path, 0700) != 0 && errno != EEXIST) {
            *p = '/';
            return -1;
        }
        *p = '/';
    }
    return mkdir(path, 0700) == 0 || errno == EEXIST ? 0 : -1;
}

int
rk__kcache_open(rk__kcache **out, const rk__kcache_cfg *cfg)
{
    rk__kcache_cfg def = { 0 };
    rk__kcache *c;

    if (cfg == NULL)
        cfg = &def;
    c = calloc(1, sizeof(*c));
    if (c == NULL)
        return rk__fail(RK_ENOMEM, "no memory for the kernel cache");
    c->nlru = cfg->lru_entries ? cfg->lru_entries : KC_DEF_LRU;
    c->lru = calloc(c->nlru, sizeof(*c->lru));
    if (c->lru == NULL) {
        free(c);
        return rk__fail(RK_ENOMEM, "no memory for the kernel cache");
    }
    pthread_mutex_init(&c->lock, NULL);
    if (!cfg->disk_off) {
        const char *xdg = getenv("XDG_CACHE_HOME");
        const char *home = getenv("HOME");
        int n = -1;
        if (cfg->dir != NULL)
            n = snprintf(c->dir, sizeof(c->dir), "%s", cfg->dir);
        else if (xdg != NULL && xdg[0] == '/')
            n = snprintf(c->dir, sizeof(c->dir), "%s/ringkernel/kernels", xdg);
        else if (home != NULL && home[0] == '/')
            n = snprintf(
                c->dir, sizeof(c->dir), "%s/.cache/ringkernel/kernels", home);
        c->has_dir
            = n > 0 && (size_t)n < sizeof(c->dir) - 40 && mkdirs(c->dir) == 0;
    }
    *out = c;
    return RK_OK;
}

void
rk__kcache_close(rk__kcache *c)
{
    if (c == NULL)
        return;
    for (uint32_t i = 0; i < c->nlru; i++)
        rk__nvrtc_image_free(&c->lru[i].img);
    pthread_mutex_destroy(&c->lock);
    free(c->lru);
    free(c);
}

const char *
rk__kcache_dir(const rk__kcache *c)
{
    return c->has_dir ? c->dir : NULL;
}

static void entry_name(const rk__kkey *key, char *buf, size_t cap);

void
rk__kcache_path(
    const rk__kcache *c, const rk__kkey *key, char *buf, size_t cap)
{
    char name[64];
    entry_name(key, name, sizeof(name));
    snprintf(buf, cap, "%s/%s", c->dir, name);
}

void
rk__kcache_stats_get(rk__kcache *c, rk__kcache_stats *st)
{
    pthread_mutex_lock(&c->lock);
    *st = c->st;
    pthread_mutex_unlock(&c->lock);
}

/* ------------------------------------------------------------ memory */

static int
img_copy(rk__nvrtc_image *dst, const rk__nvrtc_image *src)
{
    memset(dst, 0, sizeof(*dst));
    dst->data = malloc(src->size ? src->size : 1);
    if (dst->data == NULL)
        return -1;
    memcpy(dst->data, src->data, src->size);
    dst->size = src->size;
    dst->kind = src->kind;
    dst->arch = src->arch;
    return 0;
}

/* Under lock: copies the entry for key into img; 1 if found. */
static int
lru_find(rk__kcache *c, const rk__kkey *key, rk__nvrtc_image *img)
{
    for (uint32_t i = 0; i < c->nlru; i++) {
        kc_entry *e = &c->lru[i];
        if (e->used && memcmp(&e->key, key, sizeof(*key)) == 0) {
            e->used = ++c->clock;
            return img_copy(img, &e->img) == 0;
        }
    }
    return 0;
}

/* Under lock: inserts (or refreshes) key, evicting the least recent. */
static void
lru_insert(rk__kcache *c, const rk__kkey *key, const rk__nvrtc_image *img)
{
    kc_entry *victim = &c->lru[0];
    for (uint32_t i = 0; i < c->nlru; i++) {
        kc_entry *e = &c->lru[i];
        if (e->used && memcmp(&e->key, key, sizeof(*key)) == 0) {
            victim = e;
            break;
        }
        if (e->used < victim->used)
            victim = e;
    }
    rk__nvrtc_image_free(&victim->img);
    if (img_copy(&victim->img, img) != 0) {
        victim->used = 0;
        return;
    }
    victim->key = *key;
    victim->used = ++c->clock;
}

/* ------------------------------------------------------------ disk */

/* The file header's integers: n bytes, little-endian. */
static void
put_le(unsigned char *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t
get_le(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/*
 * File layout (little-endian):
 *    0  8 "RKKCACHE"        16 16 key
 *    8  4 format (1)        32  8 image bytes
 *   12  4 kind              40  8 FNV-1a 64 of the image
 *   48  4 arch              52 12 zero
 *   64  . image
 */
int
rk__kcache_decode(const unsigned char *buf, size_t len, const rk__kkey *key,
    rk__nvrtc_image *img)
{
    uint64_t n = len >= KC_HEADER ? get_le(buf + 32, 8) : 0;
    uint32_t kind = len >= KC_HEADER ? (uint32_t)get_le(buf + 12, 4) : 0;

    memset(img, 0, sizeof(*img));
    if (len < KC_HEADER || memcmp(buf, KC_MAGIC, 8) != 0
        || get_le(buf + 8, 4) != KC_FORMAT || memcmp(buf + 16, key->b, 16) != 0
        || n == 0 || n != len - KC_HEADER
        || (kind != RK__IMG_CUBIN && kind != RK__IMG_PTX)
        || get_le(buf + 40, 8) != fnv64(buf + KC_HEADER, (size_t)n))
        return 0;
    img->data = malloc((size_t)n);
    if (img->data == NULL)
        return 0;
    memcpy(img->data, buf + KC_HEADER, (size_t)n);
    img->size = (size_t)n;
    img->kind = (int)kind;
    img->arch = (int)get_le(buf + 48, 4);
    return 1;
}

/*
 * Trust. An entry is code the GPU runs with this program's rights, so it
 * is loaded only as OpenSSH's StrictModes loads a key: a regular file
 * (opened without following a link, and without blocking on a FIFO),
 * owned by this user and not writable by group or others, in a directory
 * owned by this user or root and not writable by group or others.
 * Anything else is a miss (the caller compiles), counted as untrusted and
 * logged once per cache and reason; the cache then writes nothing over a
 * file that is not this user's, and nothing into a directory it does not
 * trust.
 */
enum {
    KC_WHY_DIR = 1u << 0,   /* the directory */
    KC_WHY_LINK = 1u << 1,  /* a symbolic link at the entry's path */
    KC_WHY_KIND = 1u << 2,  /* not a regular file */
    KC_WHY_OWNER = 1u << 3, /* another user's file */
    KC_WHY_MODE = 1u << 4,  /* writable by group or others */
    KC_WHY_OPEN = 1u << 5   /* could not be opened or read */
};

/* Logs why path is not used, the first time this cache meets why. */
static void
distrust(rk__kcache *c, unsigned why, const char *path, const char *detail)
{
    int first;

    pthread_mutex_lock(&c->lock);
    c->st.untrusted++;
    first = (c->warned & why) == 0;
    c->warned |= why;
    pthread_mutex_unlock(&c->lock);
    if (first)
        rk__log(RK_LOG_WARN,
            "kernel cache: not using %s: %s; compiling instead (further "
            "such entries are not logged)",
            path, detail);
}

/* The KC_WHY_* reason sb (a directory's if dir) is not trusted, and a
 * sentence saying so in buf; 0 if it is trusted. */
static unsigned
untrusted(const struct stat *sb, int dir, char *buf, size_t cap)
{
    uid_t me = geteuid();

    if (dir ? !S_ISDIR(sb->st_mode) : !S_ISREG(sb->st_mode)) {
        snprintf(buf, cap, "not a %s", dir ? "directory" : "regular file");
        return dir ? KC_WHY_DIR : KC_WHY_KIND;
    }
    if (sb->st_uid != me && !(dir && sb->st_uid == 0)) {
        snprintf(buf, cap, "owned by uid %u, not by this user (uid %u)%s",
            (unsigned)sb->st_uid, (unsigned)me, dir ? " or root" : "");
        return dir ? KC_WHY_DIR : KC_WHY_OWNER;
    }
    if ((sb->st_mode & (S_IWGRP | S_IWOTH)) != 0) {
        snprintf(buf, cap, "writable by group or others (mode %04o)",
            (unsigned)(sb->st_mode & 07777));
        return dir ? KC_WHY_DIR : KC_WHY_MODE;
    }
    return 0;
}

/* Opens the cache directory if it is trusted: a descriptor, or -1 (and
 * the reason logged once). */
static int
dir_open(rk__kcache *c)
{
    int dfd = open(c->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    struct stat sb;
    char why[128];
    unsigned bad;

    if (dfd < 0) {
        snprintf(why, sizeof(why), "%s", strerror(errno));
        distrust(c, KC_WHY_DIR, c->dir, why);
        return -1;
    }
    if (fstat(dfd, &sb) != 0) {
        snprintf(why, sizeof(why), "%s", strerror(errno));
        bad = KC_WHY_DIR;
    } else {
        bad = untrusted(&sb, 1, why, sizeof(why));
    }
    if (bad != 0) {
        close(dfd);
        distrust(c, bad, c->dir, why);
        return -1;
    }
    return dfd;
}

/* The file name of key's entry (no directory). */
static void
entry_name(const rk__kkey *key, char *buf, size_t cap)
{
    char hex[33];
    for (int i = 0; i < 16; i++)
        snprintf(hex + 2 * i, 3, "%02x", key->b[i]);
    snprintf(buf, cap, "%s.rkc", hex);
}

static int
disk_get(rk__kcache *c, const rk__kkey *key, rk__nvrtc_image *img, int *bad)
{
    char path[KC_PATH_MAX + 64], name[64], why[128];
    unsigned char *buf = NULL;
    struct stat sb;
    size_t len = 0;
    unsigned how;
    int dfd, fd, ok;

    *bad = 0;
    rk__kcache_path(c, key, path, sizeof(path));
    entry_name(key, name, sizeof(name));
    if ((dfd = dir_open(c)) < 0)
        return 0;
    fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    close(dfd);
    if (fd < 0) {
        if (errno == ENOENT)
            return 0; /* a plain miss */
        if (errno == ELOOP) {
            distrust(c, KC_WHY_LINK, path, "a symbolic link");
        } else {
            snprintf(why, sizeof(why), "%s", strerror(errno));
            distrust(c, KC_WHY_OPEN, path, why);
        }
        return 0;
    }
    how = fstat(fd, &sb) != 0 ? KC_WHY_OPEN
                              : untrusted(&sb, 0, why, sizeof(why));
    if (how != 0) {
        if (how == KC_WHY_OPEN)
            snprintf(why, sizeof(why), "%s", strerror(errno));
        close(fd);
        distrust(c, how, path, why);
        return 0;
    }
    if (read_fd(fd, KC_MAX_IMAGE + KC_HEADER, &buf, &len) != 0)
        return 0;
    ok = rk__kcache_decode(buf, len, key, img);
    free(buf);
    *bad = !ok;
    return ok;
}

static int
write_all(int fd, const void *p, size_t n)
{
    const unsigned char *s = p;
    while (n > 0) {
        ssize_t w = write(fd, s, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        s += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Creates a temporary file in dfd (0600, O_EXCL): its descriptor and name
 * in tmp, or -1. */
static int
temp_open(int dfd, char *tmp, size_t cap)
{
    static _Atomic unsigned seq;

    for (int tries = 0; tries < 100; tries++) {
        unsigned n = atomic_fetch_add_explicit(&seq, 1, memory_order_relaxed);
        int fd;

        snprintf(tmp, cap, ".tmp-%ld-%u-%lx", (long)getpid(), n,
            (unsigned long)rk_now_ns());
        fd = openat(dfd, tmp,
            O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd >= 0 || errno != EEXIST)
            return fd;
    }
    return -1;
}

static int
disk_put(rk__kcache *c, const rk__kkey *key, const rk__nvrtc_image *img)
{
    char path[KC_PATH_MAX + 64], name[64], tmp[96];
    unsigned char hdr[KC_HEADER];
    struct stat sb;
    int dfd, fd, err, bad;

    rk__kcache_path(c, key, path, sizeof(path));
    entry_name(key, name, sizeof(name));
    memset(hdr, 0, sizeof(hdr));
    memcpy(hdr, KC_MAGIC, 8);
    put_le(hdr + 8, KC_FORMAT, 4);
    put_le(hdr + 12, (uint32_t)img->kind, 4);
    memcpy(hdr + 16, key->b, 16);
    put_le(hdr + 32, img->size, 8);
    put_le(hdr + 40, fnv64(img->data, img->size), 8);
    put_le(hdr + 48, (uint32_t)img->arch, 4);
    if ((dfd = dir_open(c)) < 0)
        return rk__fail(RK_ENOTSUP,
            "kernel cache: %s is not trusted; nothing written", c->dir);
    /* Never replace what this user does not own. */
    if (fstatat(dfd, name, &sb, AT_SYMLINK_NOFOLLOW) == 0
        && sb.st_uid != geteuid()) {
        close(dfd);
        return rk__fail(RK_ENOTSUP,
            "kernel cache: %s is owned by uid %u; not replaced", path,
            (unsigned)sb.st_uid);
    }
    if ((fd = temp_open(dfd, tmp, sizeof(tmp))) < 0) {
        err = errno;
        close(dfd);
        return rk__fail(RK_ENOTSUP,
            "kernel cache: cannot create a file in %s: %s", c->dir,
            strerror(err));
    }
    /* Whole file under a temporary name, then one rename: a reader never
     * sees a partial entry under the final name. Every path closes fd
     * and, on failure, removes the temporary file. */
    bad = write_all(fd, hdr, sizeof(hdr)) != 0
        || write_all(fd, img->data, img->size) != 0;
    err = errno;
    if (close(fd) != 0 && !bad) {
        bad = 1;
        err = errno;
    }
    if (bad) {
        unlinkat(dfd, tmp, 0);
        close(dfd);
        return rk__fail(RK_ENOTSUP, "kernel cache: cannot write %s/%s: %s",
            c->dir, tmp, strerror(err));
    }
    if (renameat(dfd, tmp, dfd, name) != 0) {
        err = errno;
        unlinkat(dfd, tmp, 0);
        close(dfd);
        return rk__fail(RK_ENOTSUP, "kernel cache: cannot rename to %s: %s",
            path, strerror(err));
    }
    close(dfd);
    return RK_OK;
}

int
rk__kcache_get(rk__kcache *c, const rk__kkey *key, rk__nvrtc_image *img)
{
    int found, bad = 0;

    pthread_mutex_lock(&c->lock);
    found = lru_find(c, key, img);
    if (found)
        c->st.mem_hits++;
    pthread_mutex_unlock(&c->lock);
    if (found)
        return RK__KC_MEM;
    found = c->has_dir && disk_get(c, key, img, &bad);
    pthread_mutex_lock(&c->lock);
    if (found) {
        c->st.disk_hits++;
        lru_insert(c, key, img);
    } else {
        c->st.misses++;
        c->st.corrupt += (uint64_t)bad;
    }
    pthread_mutex_unlock(&c->lock);
    return found ? RK__KC_DISK : RK__KC_MISS;
}

int
rk__kcache_put(rk__kcache *c, const rk__kkey *key, const rk__nvrtc_image *img)
{
    int rc = RK_OK;

    if (img->data == NULL || img->size == 0)
        return rk__fail(RK_EINVAL, "kernel cache: empty image");
    pthread_mutex_lock(&c->lock);
    lru_insert(c, key, img);
    pthread_mutex_unlock(&c->lock);
    if (c->has_dir)
        rc = disk_put(c, key, img);
    pthread_mutex_lock(&c->lock);
    if (c->has_dir) {
        if (rc == RK_OK)
            c->st.writes++;
        else
            c->st.write_errors++;
    }
    pthread_mutex_unlock(&c->lock);
    return rc;
}

int
rk__kcache_compile(
    rk__kcache *c, const rk__nvrtc_src *src, rk__nvrtc_image *img, int *how)
{
    int major, minor, arch, kind, rc;
    rk__kkey key;

    *how = RK__KC_MISS;
    memset(img, 0, sizeof(*img));
    if ((rc = rk__nvrtc_version(&major, &minor)) != RK_OK
        || (rc = rk__nvrtc_target(src->cc, &arch, &kind)) != RK_OK)
        return rc;
    if (src->want_ptx)
        kind = RK__IMG_PTX;
    if ((rc = rk__kcache_key(src, major, minor, arch, kind, &key)) != RK_OK)
        return rc;
    if ((*how = rk__kcache_get(c, &key, img)) != RK__KC_MISS)
        return RK_OK;
    if ((rc = rk__nvrtc_compile(src, img)) != RK_OK)
        return rc;
    (void)rk__kcache_put(c, &key, img); /* a disk failure is not fatal */
    return RK_OK;
}
