/*
 * Runs each example program and checks that it exits with status 0. The
 * examples check themselves against host reference computations (exact
 * vector sums, a host PageRank, the injected anomalies), so a zero exit
 * means those checks passed. The binaries are found next to this test's
 * build directory (<build>/tests/.. /examples/<name>); a missing one (a
 * build without examples) is skipped, not failed.
 */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

extern char **environ;

/* <dir of this executable>/../examples/<name> into out. */
static int
example_path(const char *name, char *out, size_t cap)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    char *slash;

    if (n <= 0)
        return -1;
    self[n] = '\0';
    if ((slash = strrchr(self, '/')) == NULL)
        return -1;
    *slash = '\0';
    if ((size_t)snprintf(out, cap, "%s/../examples/%s", self, name) >= cap)
        return -1;
    return 0;
}

static void
run_example(const char *name)
{
    char path[PATH_MAX];
    char *argv[2];
    pid_t pid;
    int status = 0, rc;

    assert_int_equal(example_path(name, path, sizeof(path)), 0);
    if (access(path, X_OK) != 0) {
        print_message("%s not built (%s); skipping\n", path, strerror(errno));
        skip();
    }
    argv[0] = path;
    argv[1] = NULL;
    rc = posix_spawn(&pid, path, NULL, NULL, argv, environ);
    assert_int_equal(rc, 0);
    while ((rc = waitpid(pid, &status, 0)) < 0 && errno == EINTR)
        ;
    assert_int_equal(rc, pid);
    if (WIFSIGNALED(status))
        fail_msg("%s killed by signal %d", name, WTERMSIG(status));
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

#define EXAMPLE_TEST(name)                                                    \
    static void test_##name(void **state)                                     \
    {                                                                         \
        (void)state;                                                          \
        run_example(#name);                                                   \
    }

/* Every example checks its own results and exits non-zero on a mismatch. */
EXAMPLE_TEST(quickstart)
EXAMPLE_TEST(streaming_pipeline)
EXAMPLE_TEST(vector_add)
EXAMPLE_TEST(pagerank)
EXAMPLE_TEST(anomaly_detection)
EXAMPLE_TEST(queue_demo)
EXAMPLE_TEST(device_query)
EXAMPLE_TEST(gpu_scale)

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quickstart),
        cmocka_unit_test(test_streaming_pipeline),
        cmocka_unit_test(test_vector_add),
        cmocka_unit_test(test_pagerank),
        cmocka_unit_test(test_anomaly_detection),
        cmocka_unit_test(test_queue_demo),
        cmocka_unit_test(test_device_query),
        cmocka_unit_test(test_gpu_scale),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
