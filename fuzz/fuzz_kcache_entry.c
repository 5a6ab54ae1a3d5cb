/*
 * libFuzzer: the compiled-kernel cache's entry decoder
 * (rk__kcache_decode), which reads files from the cache directory. The
 * key is taken from the input's bytes 16..31 so the fuzzer can reach the
 * checks past the key; an accepted entry must describe exactly the bytes
 * after the 64-byte header.
 */
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/kcache.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int
LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    rk__kkey key;
    rk__nvrtc_image img;

    memset(&key, 0, sizeof(key));
    if (size >= 32)
        memcpy(key.b, data + 16, sizeof(key.b));
    if (!rk__kcache_decode(data, size, &key, &img))
        return 0;
    if (size < 64 || img.size != size - 64
        || memcmp(img.data, data + 64, img.size) != 0)
        abort();
    rk__nvrtc_image_free(&img);
    return 0;
}
