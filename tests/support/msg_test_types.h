/*
 * tests/support/msg_test_types.h - message types shared by the message
 * tests, benchmarks and fuzz targets. Defined in msg_test_types.c (fuzz
 * and bench programs #include that file directly).
 */
#ifndef RK_TEST_MSG_TYPES_H
#define RK_TEST_MSG_TYPES_H

#include "ringkernel/message.h"

/* Point: two doubles. Fixed layout. */
#define RKT_POINT_FIELDS(X)                                                   \
    X(x, RK_DOUBLE)                                                           \
    X(y, RK_DOUBLE)
RK_MSGTYPE_DECLARE(rkt_point, RKT_POINT_FIELDS);

/* AllTypes: one field of every kind. Variable-length. */
#define RKT_ALL_FIELDS(X)                                                     \
    X(flag, RK_BOOL)                                                          \
    X(i8, RK_INT8)                                                            \
    X(i16, RK_INT16)                                                          \
    X(i32, RK_INT32)                                                          \
    X(i64, RK_INT64)                                                          \
    X(u8, RK_UINT8)                                                           \
    X(u16, RK_UINT16)                                                         \
    X(u32, RK_UINT32)                                                         \
    X(u64, RK_UINT64)                                                         \
    X(f32, RK_FLOAT)                                                          \
    X(f64, RK_DOUBLE)                                                         \
    X(arr, RK_ARRAY(RK_FLOAT, 4))                                             \
    X(bits, RK_ARRAY(RK_BOOL, 3))                                             \
    X(samples, RK_VLA(RK_DOUBLE, 1024))                                       \
    X(ids, RK_VLA(RK_INT32, 16))                                              \
    X(blob, RK_BYTES(256))                                                    \
    X(label, RK_STRING(64))                                                   \
    X(origin, RK_NESTED(rkt_point))
RK_MSGTYPE_DECLARE(rkt_all, RKT_ALL_FIELDS);

/* Particle: fixed layout with a nested type, bools and arrays. */
#define RKT_PARTICLE_FIELDS(X)                                                \
    X(pos, RK_NESTED(rkt_point))                                              \
    X(vel, RK_ARRAY(RK_FLOAT, 3))                                             \
    X(id, RK_UINT32)                                                          \
    X(alive, RK_BOOL)                                                         \
    X(mask, RK_ARRAY(RK_BOOL, 3))                                             \
    X(charge, RK_INT64)
RK_MSGTYPE_DECLARE(rkt_particle, RKT_PARTICLE_FIELDS);

/* Benchmark payloads: 64, 256 and 1024 bytes of field data, fixed. */
#define RKT_M64_FIELDS(X)                                                     \
    X(seq, RK_UINT64)                                                         \
    X(data, RK_ARRAY(RK_FLOAT, 14))
RK_MSGTYPE_DECLARE(rkt_m64, RKT_M64_FIELDS);
#define RKT_M256_FIELDS(X)                                                    \
    X(seq, RK_UINT64)                                                         \
    X(scale, RK_DOUBLE)                                                       \
    X(data, RK_ARRAY(RK_FLOAT, 60))
RK_MSGTYPE_DECLARE(rkt_m256, RKT_M256_FIELDS);
#define RKT_M1K_FIELDS(X)                                                     \
    X(seq, RK_UINT64)                                                         \
    X(scale, RK_DOUBLE)                                                       \
    X(data, RK_ARRAY(RK_FLOAT, 252))
RK_MSGTYPE_DECLARE(rkt_m1k, RKT_M1K_FIELDS);
/* A 256-byte message with scalars, a string and a vla (heap on decode). */
#define RKT_MIXED_FIELDS(X)                                                   \
    X(seq, RK_UINT64)                                                         \
    X(a, RK_DOUBLE)                                                           \
    X(b, RK_DOUBLE)                                                           \
    X(n, RK_INT32)                                                            \
    X(ok, RK_BOOL)                                                            \
    X(label, RK_STRING(64))                                                   \
    X(samples, RK_VLA(RK_FLOAT, 1024))
RK_MSGTYPE_DECLARE(rkt_mixed, RKT_MIXED_FIELDS);

#endif /* RK_TEST_MSG_TYPES_H */
