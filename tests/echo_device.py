"""A minimal device for tests of helpers.models.device_process: one notification per byte received."""

import os
import sys

from helpers.models.device_process import Lifeline

if __name__ == "__main__":
    line = Lifeline(int(sys.argv[1]))
    while not line.gone():
        data = line.get(0.05)
        if data is None:
            break
        if data:
            os.write(sys.stdout.fileno(), b"\x01" * len(data))
    sys.exit(0)
