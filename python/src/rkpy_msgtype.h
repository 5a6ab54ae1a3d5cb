/*
 * rkpy_msgtype.h - private to the MsgType files of the extension:
 * msgtype.c (the descriptor, the type registry and the MsgType type),
 * msgtype_encode.c (object -> C struct -> rk_msg_encode) and
 * msgtype_decode.c (rk_msg_decode -> C struct -> object). rkpy.h has
 * what the other files of the extension use.
 */
#ifndef RKPY_MSGTYPE_H
#define RKPY_MSGTYPE_H

#include "rkpy.h"

/* How a field is presented in Python (set by ringkernel/messages.py). */
enum { PRESENT_DEFAULT = 0, PRESENT_LIST = 1, PRESENT_UUID = 2 };

typedef struct fieldinfo {
    PyObject *name; /* interned str */
    uint8_t cls;    /* rk_fclass */
    uint8_t kind;   /* rk_fkind */
    uint8_t present;
    uint32_t offset;
    uint32_t count;
    uint32_t elem_size;
    PyObject *nested; /* MsgType, NESTED only */
} fieldinfo;

struct rkpy_msgtype {
    PyObject_HEAD const rk_msgtype *desc; /* process lifetime */
    PyObject *cls;                        /* the Python class, or None */
    int fast; /* build instances without __init__ (set by @message) */
    uint32_t align;
    int nf;
    fieldinfo *f;
    /* A type the C codec cannot describe (a plain list, a dict, no field
     * at all): encode(obj) -> bytes and decode(bytes) -> field dict, in
     * Python (PyDotCompute's msgpack); NULL for C-codec types. */
    PyObject *py_enc, *py_dec;
};

/* Element size and numpy dtype name of each rk_fkind (msgtype.c). */
extern const uint8_t rkpy_kind_size[];
extern const char *const rkpy_kind_dtype[];
/* Objects made once by rkpy_msgtype_init (msgtype.c): the int 0, (),
 * and the interned names "message_id", "correlation_id", "priority" and
 * "__dict__". */
extern PyObject *rkpy_zero;
extern PyObject *rkpy_empty_args;
extern PyObject *rkpy_str_message_id, *rkpy_str_correlation_id,
    *rkpy_str_priority;
extern PyObject *rkpy_str_dict;

#endif
