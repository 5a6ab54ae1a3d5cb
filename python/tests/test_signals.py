"""Ctrl-C during a blocking receive raises KeyboardInterrupt."""

import os
import signal
import subprocess
import sys
import textwrap

# The child installs Python's Ctrl-C handler itself: started from a
# background job (nohup, `cmd &` in a script), it inherits SIGINT ignored,
# and Python then leaves it ignored.
CHILD = textwrap.dedent("""
    import os, signal, sys
    import ringkernel as rk

    signal.signal(signal.SIGINT, signal.default_int_handler)

    @rk.ring_kernel(kernel_id="idle")
    def idle(ctx):
        while not ctx.should_terminate:
            ctx.receive()

    rt = rk.BlockingRuntime()
    rt.launch("idle"); rt.activate("idle")
    try:
        print("ready", flush=True)
        rt.receive("idle", timeout=60)
        print("no interrupt", flush=True)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
    except BaseException as e:
        print("other", repr(e), flush=True)
    rt.close()
""")


def test_ctrl_c_interrupts_a_blocking_receive():
    p = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    os.kill(p.pid, signal.SIGINT)
    # Without the signal check the receive would wait its full 60 s and
    # print "no interrupt" (the generous timeout is for the test harness).
    out, _ = p.communicate(timeout=50)
    assert out.strip() == "interrupted"
    assert p.returncode == 0


EXIT_CHILD = textwrap.dedent("""
    import ringkernel as rk

    @rk.ring_kernel(kernel_id="spinner")
    def spinner(ctx):
        while not ctx.should_terminate:
            ctx.receive()

    rt = rk.BlockingRuntime()
    rt.launch("spinner"); rt.activate("spinner")
    print("running", flush=True)
    # no close: the interpreter's exit must stop the kernel threads first
""")


def test_exit_with_running_python_kernels_is_clean():
    p = subprocess.run([sys.executable, "-c", EXIT_CHILD], capture_output=True, text=True,
                       timeout=60)
    assert p.stdout.strip() == "running"
    assert p.returncode == 0, p.stderr
    assert "Fatal" not in p.stderr and "Traceback" not in p.stderr
