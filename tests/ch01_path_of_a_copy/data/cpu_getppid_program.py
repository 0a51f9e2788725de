"""A CPU program with known syscall counts: N getppid() and N write() calls (strace fixture)."""
import os
import sys

n = int(sys.argv[1])
fd = os.open("/dev/null", os.O_WRONLY)
for _ in range(n):
    os.getppid()
    os.write(fd, b"x")
os.close(fd)
