/* Descriptors for tests/support/msg_test_types.h. */
#include "msg_test_types.h"

RK_MSGTYPE_DEFINE(rkt_point, "Point", 0x100, RKT_POINT_FIELDS);
RK_MSGTYPE_DEFINE(rkt_all, "AllTypes", 0x101, RKT_ALL_FIELDS);
RK_MSGTYPE_DEFINE_V(rkt_particle, "Particle", 0x102, 3, RKT_PARTICLE_FIELDS);
RK_MSGTYPE_DEFINE(rkt_m64, "Msg64", 0x110, RKT_M64_FIELDS);
RK_MSGTYPE_DEFINE(rkt_m256, "Msg256", 0x111, RKT_M256_FIELDS);
RK_MSGTYPE_DEFINE(rkt_m1k, "Msg1K", 0x112, RKT_M1K_FIELDS);
RK_MSGTYPE_DEFINE(rkt_mixed, "Mixed", 0x113, RKT_MIXED_FIELDS);
