/*
 * fuzz/msg_types.c - the message types the fuzz targets run against,
 * #included by each target (every target is its own program). They add
 * to tests/support/msg_test_types.c what those four test types leave
 * out: variable-length arrays of every element kind (bools included),
 * every scalar and fixed-array kind in one fixed layout, a type with the
 * most fields allowed (64), and chains of nested types as deep as the
 * decoder takes (16 levels below the top) and one deeper, which it must
 * refuse. fz_types[] lists them all; fz_fixed_types[] the fixed layouts.
 */
#include "../tests/support/msg_test_types.c"

/* Variable-length arrays of every kind, a string and bytes. */
#define FZ_VLAS_FIELDS(X)                                                     \
    X(vb, RK_VLA(RK_BOOL, 12))                                                \
    X(vi8, RK_VLA(RK_INT8, 12))                                               \
    X(vi16, RK_VLA(RK_INT16, 12))                                             \
    X(vi32, RK_VLA(RK_INT32, 12))                                             \
    X(vi64, RK_VLA(RK_INT64, 12))                                             \
    X(vu8, RK_VLA(RK_UINT8, 12))                                              \
    X(vu16, RK_VLA(RK_UINT16, 12))                                            \
    X(vu32, RK_VLA(RK_UINT32, 12))                                            \
    X(vu64, RK_VLA(RK_UINT64, 12))                                            \
    X(vf32, RK_VLA(RK_FLOAT, 12))                                             \
    X(vf64, RK_VLA(RK_DOUBLE, 12))                                            \
    X(s, RK_STRING(24))                                                       \
    X(by, RK_BYTES(24))
RK_MSGTYPE_DECLARE(fz_vlas, FZ_VLAS_FIELDS);
RK_MSGTYPE_DEFINE(fz_vlas, "Vlas", 0x200, FZ_VLAS_FIELDS);

/* Every scalar kind and a fixed array of every kind: a fixed layout. */
#define FZ_SCALARS_FIELDS(X)                                                  \
    X(b, RK_BOOL)                                                             \
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
    X(ab, RK_ARRAY(RK_BOOL, 3))                                               \
    X(ai8, RK_ARRAY(RK_INT8, 3))                                              \
    X(ai16, RK_ARRAY(RK_INT16, 3))                                            \
    X(ai32, RK_ARRAY(RK_INT32, 3))                                            \
    X(ai64, RK_ARRAY(RK_INT64, 3))                                            \
    X(au8, RK_ARRAY(RK_UINT8, 3))                                             \
    X(au16, RK_ARRAY(RK_UINT16, 3))                                           \
    X(au32, RK_ARRAY(RK_UINT32, 3))                                           \
    X(au64, RK_ARRAY(RK_UINT64, 3))                                           \
    X(af32, RK_ARRAY(RK_FLOAT, 3))                                            \
    X(af64, RK_ARRAY(RK_DOUBLE, 3))
RK_MSGTYPE_DECLARE(fz_scalars, FZ_SCALARS_FIELDS);
RK_MSGTYPE_DEFINE(fz_scalars, "Scalars", 0x201, FZ_SCALARS_FIELDS);

/* RK_MSG_MAX_FIELDS (64) fields of every class. */
#define FZ_WIDE_FIELDS(X)                                                     \
    X(w00, RK_BOOL)                                                           \
    X(w01, RK_INT8)                                                           \
    X(w02, RK_INT16)                                                          \
    X(w03, RK_INT32)                                                          \
    X(w04, RK_INT64)                                                          \
    X(w05, RK_UINT8)                                                          \
    X(w06, RK_UINT16)                                                         \
    X(w07, RK_UINT32)                                                         \
    X(w08, RK_UINT64)                                                         \
    X(w09, RK_FLOAT)                                                          \
    X(w10, RK_DOUBLE)                                                         \
    X(w11, RK_VLA(RK_FLOAT, 4))                                               \
    X(w12, RK_STRING(8))                                                      \
    X(w13, RK_BYTES(8))                                                       \
    X(w14, RK_ARRAY(RK_BOOL, 2))                                              \
    X(w15, RK_NESTED(rkt_point))                                              \
    X(w16, RK_BOOL)                                                           \
    X(w17, RK_INT8)                                                           \
    X(w18, RK_INT16)                                                          \
    X(w19, RK_INT32)                                                          \
    X(w20, RK_INT64)                                                          \
    X(w21, RK_UINT8)                                                          \
    X(w22, RK_UINT16)                                                         \
    X(w23, RK_UINT32)                                                         \
    X(w24, RK_UINT64)                                                         \
    X(w25, RK_FLOAT)                                                          \
    X(w26, RK_DOUBLE)                                                         \
    X(w27, RK_VLA(RK_FLOAT, 4))                                               \
    X(w28, RK_STRING(8))                                                      \
    X(w29, RK_BYTES(8))                                                       \
    X(w30, RK_ARRAY(RK_BOOL, 2))                                              \
    X(w31, RK_NESTED(rkt_point))                                              \
    X(w32, RK_BOOL)                                                           \
    X(w33, RK_INT8)                                                           \
    X(w34, RK_INT16)                                                          \
    X(w35, RK_INT32)                                                          \
    X(w36, RK_INT64)                                                          \
    X(w37, RK_UINT8)                                                          \
    X(w38, RK_UINT16)                                                         \
    X(w39, RK_UINT32)                                                         \
    X(w40, RK_UINT64)                                                         \
    X(w41, RK_FLOAT)                                                          \
    X(w42, RK_DOUBLE)                                                         \
    X(w43, RK_VLA(RK_FLOAT, 4))                                               \
    X(w44, RK_STRING(8))                                                      \
    X(w45, RK_BYTES(8))                                                       \
    X(w46, RK_ARRAY(RK_BOOL, 2))                                              \
    X(w47, RK_NESTED(rkt_point))                                              \
    X(w48, RK_BOOL)                                                           \
    X(w49, RK_INT8)                                                           \
    X(w50, RK_INT16)                                                          \
    X(w51, RK_INT32)                                                          \
    X(w52, RK_INT64)                                                          \
    X(w53, RK_UINT8)                                                          \
    X(w54, RK_UINT16)                                                         \
    X(w55, RK_UINT32)                                                         \
    X(w56, RK_UINT64)                                                         \
    X(w57, RK_FLOAT)                                                          \
    X(w58, RK_DOUBLE)                                                         \
    X(w59, RK_VLA(RK_FLOAT, 4))                                               \
    X(w60, RK_STRING(8))                                                      \
    X(w61, RK_BYTES(8))                                                       \
    X(w62, RK_ARRAY(RK_BOOL, 2))                                              \
    X(w63, RK_NESTED(rkt_point))
RK_MSGTYPE_DECLARE(fz_wide, FZ_WIDE_FIELDS);
RK_MSGTYPE_DEFINE(fz_wide, "Wide", 0x202, FZ_WIDE_FIELDS);

/* Nesting: fz_d0 is a leaf, fz_dK holds fz_d(K-1). fz_d16 puts fz_d0
 * at depth 16, the deepest the decoder takes; fz_d17 one deeper. Fixed
 * layouts, so the fixed-layout fuzzer walks them too. */
#define FZ_D0_FIELDS(X) X(v, RK_UINT8) X(ok, RK_BOOL)
RK_MSGTYPE_DECLARE(fz_d0, FZ_D0_FIELDS);
RK_MSGTYPE_DEFINE(fz_d0, "D0", 0x300, FZ_D0_FIELDS);
#define FZ_D1_FIELDS(X) X(n, RK_NESTED(fz_d0)) X(k, RK_INT16)
RK_MSGTYPE_DECLARE(fz_d1, FZ_D1_FIELDS);
RK_MSGTYPE_DEFINE(fz_d1, "D1", 0x301, FZ_D1_FIELDS);
#define FZ_D2_FIELDS(X) X(n, RK_NESTED(fz_d1)) X(k, RK_INT16)
RK_MSGTYPE_DECLARE(fz_d2, FZ_D2_FIELDS);
RK_MSGTYPE_DEFINE(fz_d2, "D2", 0x302, FZ_D2_FIELDS);
#define FZ_D3_FIELDS(X) X(n, RK_NESTED(fz_d2)) X(k, RK_INT16)
RK_MSGTYPE_DECLARE(fz_d3, FZ_D3_FIELDS);
RK_MSGTYPE_DEFINE(fz_d3, "D3", 0x303, FZ_D3_FIELDS);
#define FZ_D4_FIELDS(X) X(n, RK_NESTED(fz_d3)) X(k, RK_INT16)
RK_MSGTYPE_DECLARE(fz_d4, FZ_D4_FIELDS);
RK_MSGTYPE_DEFINE(fz_d4, "D4", 0x304, FZ_D4_FIELDS);
#define FZ_D5_FIELDS(X) X(n, RK_NESTED(fz_d4)) X(k, RK_INT16)
RK_MSGTYPE_DECLARE(fz_d5, FZ_D5_FIELDS);
RK_MSGTYPE_DEFINE(fz_d5, "D5", 0x305, FZ_D5_FIELDS);
#define FZ_D6_FIELDS(X) X(n, RK_NESTED(fz_d5)) X(k, RK_INT16)
RK_MSGTYPE_DECLARE(fz_d6, FZ_D6_FIELDS);
RK_MSGTYPE_DEFINE(fz_d6, "D6", 0x306, FZ_D6_FIELDS);
#define FZ_D7_FIELDS(X) X(n, RK_NESTED(fz_d6)) X(k, RK_INT16)
RK_MSGTYPE_DECLARE(fz_d7, FZ_D7_FIELDS);
RK_MSGTYPE_DEFINE(fz_d7, "D7", 0x307, FZ_D7_FIELDS);
#define FZ_D8_FIELDS(X) X(n, RK_NESTED(fz_d7)) X(k, RK_INT16)
RK_MSGTYPE_DECLARE(fz_d8, FZ_D8_FIELDS);
RK_MSGTYPE_DEFINE(fz_d8, "D8", 0x308, FZ_D8_FIELDS);
#define FZ_D9_FIELDS(X) X(n, RK_NESTED(fz_d8)) X(k, RK_INT16)
RK_MSGTYPE_DECLARE(fz_d9, FZ_D9_FIELDS);
RK_MSGTYPE_DEFINE(fz_d9, "D9", 0x309, FZ_D9_FIELDS);
#define FZ_D10_FIELDS(X) X(n, RK_NESTED(fz_d9)) X(k, RK_INT16)
RK_MSGTYPE_DECLARE(fz_d10, FZ_D10_FIELDS);
RK_MSGTYPE_DEFINE(fz_d10, "D10", 0x30a, FZ_D10_FIELDS);
#define FZ_D11_FIELDS(X) X(n, RK_NESTED(fz_d10)) X(k, RK_INT16)
RK_MSGTYPE_DECLARE(fz_d11, FZ_D11_FIELDS);
RK_MSGTYPE_DEFINE(fz_d11, "D11", 0x30b, FZ_D11_FIELDS);
#define FZ_D12_FIELDS(X) X(n, RK_NESTED(fz_d11)) X(k, RK_INT16)
RK_MSGTYPE_DECLARE(fz_d12, FZ_D12_FIELDS);
RK_MSGTYPE_DEFINE(fz_d12, "D12", 0x30c, FZ_D12_FIELDS);
#define FZ_D13_FIELDS(X) X(n, RK_NESTED(fz_d12)) X(k, RK_INT16)
RK_MSGTYPE_DECLARE(fz_d13, FZ_D13_FIELDS);
RK_MSGTYPE_DEFINE(fz_d13, "D13", 0x30d, FZ_D13_FIELDS);
#define FZ_D14_FIELDS(X) X(n, RK_NESTED(fz_d13)) X(k, RK_INT16)
RK_MSGTYPE_DECLARE(fz_d14, FZ_D14_FIELDS);
RK_MSGTYPE_DEFINE(fz_d14, "D14", 0x30e, FZ_D14_FIELDS);
#define FZ_D15_FIELDS(X) X(n, RK_NESTED(fz_d14)) X(k, RK_INT16)
RK_MSGTYPE_DECLARE(fz_d15, FZ_D15_FIELDS);
RK_MSGTYPE_DEFINE(fz_d15, "D15", 0x30f, FZ_D15_FIELDS);
#define FZ_D16_FIELDS(X) X(n, RK_NESTED(fz_d15)) X(k, RK_INT16)
RK_MSGTYPE_DECLARE(fz_d16, FZ_D16_FIELDS);
RK_MSGTYPE_DEFINE(fz_d16, "D16", 0x310, FZ_D16_FIELDS);
#define FZ_D17_FIELDS(X) X(n, RK_NESTED(fz_d16)) X(k, RK_INT16)
RK_MSGTYPE_DECLARE(fz_d17, FZ_D17_FIELDS);
RK_MSGTYPE_DEFINE(fz_d17, "D17", 0x311, FZ_D17_FIELDS);

static const rk_msgtype *const fz_types[] = {
    &rkt_all_msgtype,
    &rkt_point_msgtype,
    &rkt_particle_msgtype,
    &rkt_mixed_msgtype,
    &fz_vlas_msgtype,
    &fz_scalars_msgtype,
    &fz_wide_msgtype,
    &fz_d16_msgtype,
    &fz_d17_msgtype,
    &fz_d1_msgtype,
    &rkt_m64_msgtype,
    &rkt_m1k_msgtype,
};
#define FZ_NTYPES (sizeof(fz_types) / sizeof(fz_types[0]))

/* Every fixed layout above. */
static const rk_msgtype *const fz_fixed_types[] = {
    &rkt_point_msgtype,
    &rkt_particle_msgtype,
    &rkt_m64_msgtype,
    &rkt_m256_msgtype,
    &rkt_m1k_msgtype,
    &fz_scalars_msgtype,
    &fz_d0_msgtype,
    &fz_d1_msgtype,
    &fz_d16_msgtype,
    &fz_d17_msgtype,
};
#define FZ_NFIXED (sizeof(fz_fixed_types) / sizeof(fz_fixed_types[0]))
