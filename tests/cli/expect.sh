#!/bin/sh
# tests/cli/expect.sh STATUS REGEX COMMAND [ARGS...]
# Runs COMMAND, then passes only if it exited with STATUS and its output
# (stdout and stderr together) matches the extended regular expression
# REGEX. The CLI tests in tests/CMakeLists.txt are each one call of this.
want=$1
regex=$2
shift 2
out=$("$@" 2>&1)
got=$?
printf '%s\n' "$out"
if [ "$got" -ne "$want" ]; then
    echo "expect.sh: exit status $got, wanted $want" >&2
    exit 1
fi
if ! printf '%s\n' "$out" | grep -Eq -- "$regex"; then
    echo "expect.sh: output does not match /$regex/" >&2
    exit 1
fi
exit 0
