/** @file
 * ringkernel/version.h - compile-time and run-time version.
 *
 * The build reads RK_VERSION_MAJOR/MINOR/PATCH from this file, so this is
 * the single place the version lives.
 */
#ifndef RINGKERNEL_VERSION_H
#define RINGKERNEL_VERSION_H

#define RK_VERSION_MAJOR 0 /**< major version: incompatible API changes */
#define RK_VERSION_MINOR 1 /**< minor version: compatible additions */
#define RK_VERSION_PATCH 0 /**< patch version: fixes */

/** ABI version of the shared library (its SOVERSION). Bump on any ABI break. */
#define RK_ABI_VERSION 0

/** The version of the headers as MAJOR*10000 + MINOR*100 + PATCH (compare with
 * rk_version_number()). */
#define RK_VERSION_NUMBER \
    ((RK_VERSION_MAJOR * 10000) + (RK_VERSION_MINOR * 100) + RK_VERSION_PATCH)

#ifdef __cplusplus
extern "C" {
#endif

/** The library's version as "MAJOR.MINOR.PATCH", fixed at build time of the
 * library (not of the caller), so a program can detect a mismatch. The
 * string is static; the caller must not free it. */
const char *
rk_version(void);

/** The same version as MAJOR*10000 + MINOR*100 + PATCH. */
unsigned
rk_version_number(void);

#ifdef __cplusplus
}
#endif

#endif /* RINGKERNEL_VERSION_H */
