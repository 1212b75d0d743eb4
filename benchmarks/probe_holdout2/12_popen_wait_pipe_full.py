"""``Popen(stdout=PIPE).wait()`` deadlocks when the child writes more than the pipe holds.

Report: https://github.com/localstack/localstack/pull/1101 ("Fix subprocess.wait() hanging"),
quoting the warning in the ``subprocess`` documentation; also
https://github.com/motoz/PellMon/issues/48 and https://github.com/keylime/keylime/pull/332.

A pipeline step runs a worker script in a child Python process with ``stdout=PIPE`` and
calls ``proc.wait()`` before reading the output. The child prints a report of ~1 MB; the
pipe buffer (64 KiB on Linux) fills, and the child blocks in ``write`` waiting for the
parent to read, while the parent blocks in ``waitpid`` waiting for the child to exit.
Neither uses CPU: a deadlock between two processes. Fix (the documented one, adopted in
the PR): ``out, err = proc.communicate()`` (or ``subprocess.run(..., capture_output=True)``),
or read the pipe before ``wait()``, or send the output to a file.
"""
import subprocess
import sys

CHILD = r"""
for i in range(20000):
    print(f"row {i:06d} " + "x" * 40)
"""

if __name__ == "__main__":
    proc = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE)
    rc = proc.wait()
    out = proc.stdout.read()
    print(rc, len(out))
