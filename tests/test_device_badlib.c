/*
 * A library that loads but is not a CUDA driver (or a stub driver): the
 * loader must reject it with a status and a detail, not crash on a
 * missing symbol. RK_CUDA_DRIVER/RK_NVML_LIBRARY point at the C maths
 * library, present everywhere; when the toolkit's stub libcuda.so is
 * installed, a second check (cuInit failing) runs in a child process.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ringkernel/ringkernel.h"

#define NOT_CUDA "libm.so.6"

static const char *const stub_paths[] = {
    "/usr/local/cuda/lib64/stubs/libcuda.so",
    "/usr/local/cuda/lib/stubs/libcuda.so",
    "/usr/local/cuda-13.0/lib/stubs/libcuda.so",
    "/usr/local/cuda/targets/x86_64-linux/lib/stubs/libcuda.so",
};

static void
test_not_a_driver(void **state)
{
    rk_gpu_monitor *m = NULL;
    const char *detail;
    (void)state;

    assert_int_equal(rk_cuda_probe(&detail), RK_CUDA_NO_DRIVER);
    assert_true(strstr(detail, "lacks the entry point") != NULL);
    assert_int_equal(rk_gpu_monitor_open(&m), RK_OK);
    assert_int_equal(
        rk_gpu_monitor_status(m, &detail), RK_MONITOR_UNAVAILABLE);
    assert_true(strstr(detail, "lacks") != NULL);
    rk_gpu_monitor_close(m);
}

static void
test_stub_driver_fails_init(void **state)
{
    const char *stub = NULL;
    pid_t pid;
    int status;
    (void)state;

    for (size_t i = 0; i < sizeof(stub_paths) / sizeof(stub_paths[0]); i++)
        if (access(stub_paths[i], R_OK) == 0)
            stub = stub_paths[i];
    if (stub == NULL) {
        print_message("no CUDA stub library installed; skipping\n");
        skip();
    }
    /* A fresh image of this program (see main), since the driver is
     * loaded once per process and this one has already loaded "libm". */
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        setenv("RK_CUDA_DRIVER", stub, 1);
        execl("/proc/self/exe", "test_device_badlib", "--probe-stub",
            (char *)NULL);
        _exit(127);
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

int
main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_not_a_driver),
        cmocka_unit_test(test_stub_driver_fails_init),
    };
    if (argc == 2 && strcmp(argv[1], "--probe-stub") == 0) {
        const char *detail;
        rk_cuda_status st = rk_cuda_probe(&detail);
        printf("stub driver: %s (%s)\n", rk_cuda_status_name(st), detail);
        return st == RK_CUDA_INIT_FAILED && strstr(detail, "cuInit") ? 0 : 1;
    }
    setenv("RK_CUDA_DRIVER", NOT_CUDA, 1);
    setenv("RK_NVML_LIBRARY", NOT_CUDA, 1);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
