/*
 * tests/fake_cuda/fake_info.c - the stand-in driver's error names, device
 * attributes and image checks (test-only; see fake_cuda.c).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_cuda.h"

/* ------------------------------------------------------------ errors */

EXPORT CUresult
cuGetErrorName(CUresult r, const char **s)
{
    switch (r) {
    case OK:
        *s = "CUDA_SUCCESS";
        break;
    case E_INVALID_VALUE:
        *s = "CUDA_ERROR_INVALID_VALUE";
        break;
    case E_OUT_OF_MEMORY:
        *s = "CUDA_ERROR_OUT_OF_MEMORY";
        break;
    case E_INVALID_IMAGE:
        *s = "CUDA_ERROR_INVALID_IMAGE";
        break;
    case E_NO_BINARY_FOR_GPU:
        *s = "CUDA_ERROR_NO_BINARY_FOR_GPU";
        break;
    case E_INVALID_PTX:
        *s = "CUDA_ERROR_INVALID_PTX";
        break;
    case E_NOT_FOUND:
        *s = "CUDA_ERROR_NOT_FOUND";
        break;
    case E_NOT_READY:
        *s = "CUDA_ERROR_NOT_READY";
        break;
    case E_ILLEGAL_ADDRESS:
        *s = "CUDA_ERROR_ILLEGAL_ADDRESS";
        break;
    case E_ASSERT:
        *s = "CUDA_ERROR_ASSERT";
        break;
    case E_LAUNCH_FAILED:
        *s = "CUDA_ERROR_LAUNCH_FAILED";
        break;
    case E_COOP_TOO_LARGE:
        *s = "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE";
        break;
    case E_INVALID_DEVICE:
        *s = "CUDA_ERROR_INVALID_DEVICE";
        break;
    case E_INVALID_CONTEXT:
        *s = "CUDA_ERROR_INVALID_CONTEXT";
        break;
    case E_PEER_UNSUPPORTED:
        *s = "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED";
        break;
    case E_PEER_ALREADY_ENABLED:
        *s = "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED";
        break;
    case E_TOO_MANY_PEERS:
        *s = "CUDA_ERROR_TOO_MANY_PEERS";
        break;
    case E_WOULD_HANG:
        *s = "FAKE_ERROR_WOULD_HANG";
        break;
    default:
        *s = "CUDA_ERROR_UNKNOWN";
        return E_INVALID_VALUE;
    }
    return OK;
}

EXPORT CUresult
cuGetErrorString(CUresult r, const char **s)
{
    if (cuGetErrorName(r, s) != OK)
        return E_INVALID_VALUE;
    *s = r == OK                 ? "no error"
        : r == E_ILLEGAL_ADDRESS ? "an illegal memory access was encountered"
        : r == E_ASSERT          ? "device-side assert triggered"
        : r == E_LAUNCH_FAILED   ? "unspecified launch failure"
                                 : "fake CUDA driver error";
    return OK;
}

/* ------------------------------------------------------------ device */

EXPORT CUresult
cuInit(unsigned flags)
{
    return flags == 0 ? OK : E_INVALID_VALUE;
}

EXPORT CUresult
cuDriverGetVersion(int *v)
{
    *v = 13000;
    return OK;
}

EXPORT CUresult
cuDeviceGetCount(int *n)
{
    *n = fake_devices();
    return OK;
}

EXPORT CUresult
cuDeviceGet(CUdevice *d, int ordinal)
{
    if (ordinal < 0 || ordinal >= fake_devices())
        return E_INVALID_VALUE;
    *d = ordinal;
    return OK;
}

EXPORT CUresult
cuDeviceGetName(char *name, int len, CUdevice d)
{
    (void)d;
    if (len <= 0)
        return E_INVALID_VALUE;
    strncpy(
        name, "ringkernel fake CUDA device (CPU threads)", (size_t)len - 1);
    name[len - 1] = '\0';
    return OK;
}

EXPORT CUresult
cuDeviceTotalMem_v2(size_t *bytes, CUdevice d)
{
    (void)d;
    *bytes = (size_t)1 << 30;
    return OK;
}

EXPORT CUresult
cuDeviceGetAttribute(int *v, int attr, CUdevice d)
{
    int cc = env_int("FAKE_CUDA_CC", 90);
    (void)d;
    switch (attr) {
    case 1: /* max threads per block */
        *v = 1024;
        break;
    case 10: /* warp size */
        *v = 32;
        break;
    case 13: /* clock rate kHz */
        *v = 1000000;
        break;
    case 16: /* SMs */
        *v = env_int("FAKE_CUDA_SMS", 2);
        break;
    case 17: /* kernel exec timeout */
        *v = env_int("FAKE_CUDA_EXEC_TIMEOUT", 0);
        break;
    case 18: /* integrated */
        *v = 0;
        break;
    case 19: /* can map host memory */
    case 41: /* unified addressing */
    case 83: /* managed memory */
    case 95: /* cooperative launch */
        *v = 1;
        break;
    case 33: /* PCI bus */
        *v = 0;
        break;
    case 75:
        *v = cc / 10;
        break;
    case 76:
        *v = cc % 10;
        break;
    default:
        *v = 0;
        break;
    }
    return OK;
}

/* Checks an image the way the driver would reject one: a CUDA ELF cubin
 * (EM_CUDA = 190), or PTX whose .target is at most the device's. */
CUresult
fake_check_image(const unsigned char *img, size_t *size, int *is_ptx)
{
    int cc = env_int("FAKE_CUDA_CC", 90);

    if (img[0] == 0x7f && img[1] == 'E' && img[2] == 'L' && img[3] == 'F') {
        uint64_t shoff, phoff, end;
        uint16_t shentsize, shnum, phentsize, phnum;
        if (img[4] != 2 || (img[18] | img[19] << 8) != 190)
            return E_INVALID_IMAGE; /* not ELF64 for EM_CUDA */
        /* The image's size: the furthest end of the header tables and of
         * every section with contents. */
        memcpy(&phoff, img + 32, 8);
        memcpy(&shoff, img + 40, 8);
        memcpy(&phentsize, img + 54, 2);
        memcpy(&phnum, img + 56, 2);
        memcpy(&shentsize, img + 58, 2);
        memcpy(&shnum, img + 60, 2);
        if (shoff > (1u << 28) || phoff > (1u << 28) || shentsize < 64)
            return E_INVALID_IMAGE;
        end = shoff + (uint64_t)shentsize * shnum;
        if (phoff + (uint64_t)phentsize * phnum > end)
            end = phoff + (uint64_t)phentsize * phnum;
        for (uint16_t i = 0; i < shnum; i++) {
            const unsigned char *sh = img + shoff + (uint64_t)i * shentsize;
            uint32_t type;
            uint64_t off, sz;
            memcpy(&type, sh + 4, 4);
            memcpy(&off, sh + 24, 8);
            memcpy(&sz, sh + 32, 8);
            if (type != 8 /* SHT_NOBITS */ && off + sz > end)
                end = off + sz;
        }
        if (end < 64 || end > (1u << 28))
            return E_INVALID_IMAGE;
        *size = (size_t)end;
        *is_ptx = 0;
        return OK;
    }
    {
        const char *p = (const char *)img, *t;
        size_t n = strnlen(p, 1u << 28);
        int target;
        if (strstr(p, ".version") == NULL
            || (t = strstr(p, ".target sm_")) == NULL)
            return E_INVALID_PTX;
        target = atoi(t + 11);
        if (target > cc)
            return E_NO_BINARY_FOR_GPU;
        *size = n + 1;
        *is_ptx = 1;
        return OK;
    }
}
