/*
 * src/backend/cuda/kcache.h - the compiled-kernel cache: an in-memory LRU
 * in front of an on-disk store.
 *
 * Key: a 128-bit hash (FNV-1a 128) of everything that decides the image:
 * the full source NVRTC sees, the device headers it includes (their bytes,
 * read from the include directory), the options, NVRTC's version, the
 * target architecture and image kind, and ringkernel's version.
 *
 * Disk: one file per key, <dir>/<32 hex digits>.rkc, under
 * $XDG_CACHE_HOME/ringkernel/kernels (else ~/.cache/ringkernel/kernels)
 * unless the config names a directory. A file is written to a temporary
 * name in the same directory and renamed over the final name, so a reader
 * sees either no file or a complete one, and concurrent writers of the
 * same key each install a complete file. A file whose header, length, key
 * or checksum does not match is counted corrupt and treated as a miss; the
 * recompiled image replaces it. An entry is trusted (loaded) only if it is
 * a regular file owned by this user and not writable by group or others,
 * in a directory owned by this user or root and not writable by group or
 * others (OpenSSH's StrictModes); anything else is a miss counted
 * untrusted and logged once (kcache.c, "Trust"), and the cache neither
 * writes into an untrusted directory nor replaces another user's file.
 *
 * Threads: every call may come from any thread; one mutex guards the LRU
 * and the counters, never held while touching the disk.
 *
 * Ownership: images returned by rk__kcache_get are copies the caller frees
 * (rk__nvrtc_image_free); rk__kcache_put copies what it is given.
 */
#ifndef RK_SRC_BACKEND_CUDA_KCACHE_H
#define RK_SRC_BACKEND_CUDA_KCACHE_H

#include <stddef.h>
#include <stdint.h>

#include "backend/cuda/nvrtc.h"

typedef struct rk__kkey {
    uint8_t b[16];
} rk__kkey;

typedef struct rk__kcache_cfg {
    const char *dir;      /* NULL: the XDG default */
    uint32_t lru_entries; /* 0: 32; the in-memory front */
    int disk_off;         /* 1: memory only */
} rk__kcache_cfg;

typedef struct rk__kcache_stats {
    uint64_t mem_hits, disk_hits, misses, corrupt, writes, write_errors;
    uint64_t untrusted; /* disk lookups refused by the trust rules */
} rk__kcache_stats;

typedef struct rk__kcache rk__kcache;

/* Opens a cache. A directory that cannot be created leaves the cache
 * memory-only (rk__kcache_dir returns NULL), which is not an error. */
int rk__kcache_open(rk__kcache **out, const rk__kcache_cfg *cfg);
void rk__kcache_close(rk__kcache *c);
const char *rk__kcache_dir(const rk__kcache *c);

/* The key for compiling src to (arch, kind) with NVRTC major.minor. */
int rk__kcache_key(const rk__nvrtc_src *src, int nv_major, int nv_minor,
    int arch, int kind, rk__kkey *key);

/* Where a hit came from. */
enum { RK__KC_MISS = 0, RK__KC_MEM = 1, RK__KC_DISK = 2 };

/* Looks key up: memory, then disk (a disk hit enters the LRU). Returns
 * RK__KC_* and on a hit fills *img (a copy, without a log). */
int rk__kcache_get(rk__kcache *c, const rk__kkey *key, rk__nvrtc_image *img);

/* Stores img under key in memory and on disk. RK_OK, or the disk error
 * (the memory copy is kept either way). */
int rk__kcache_put(
    rk__kcache *c, const rk__kkey *key, const rk__nvrtc_image *img);

/* The path of key's file (for tests), into buf. */
void rk__kcache_path(
    const rk__kcache *c, const rk__kkey *key, char *buf, size_t cap);

void rk__kcache_stats_get(rk__kcache *c, rk__kcache_stats *st);

/* Decodes a cache file's bytes (external input: checked field by field,
 * never trusted). 1 and *img (caller frees) when it is a valid entry for
 * key; 0 otherwise. */
int rk__kcache_decode(const unsigned char *buf, size_t len,
    const rk__kkey *key, rk__nvrtc_image *img);

/*
 * Compile through the cache: the key for src on the target NVRTC picks,
 * then memory, disk, and finally NVRTC (whose image is stored). *how says
 * which (RK__KC_*). Errors are rk__nvrtc_compile's; on RK_ECOMPILE img
 * carries the log.
 */
int rk__kcache_compile(
    rk__kcache *c, const rk__nvrtc_src *src, rk__nvrtc_image *img, int *how);

#endif /* RK_SRC_BACKEND_CUDA_KCACHE_H */
