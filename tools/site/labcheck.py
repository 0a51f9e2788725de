"""Start `make lab` headless and check that JupyterLab's REST API answers on localhost.

    python -m tools.site.labcheck -- make lab LAB_FLAGS=--no-browser

Picks a free port and a token, runs the command with PORT and JUPYTER_TOKEN set, polls
/api/status and /lab until they answer (timeout 120 s), then stops the whole process group.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str) -> tuple[int, bytes]:
    with urllib.request.urlopen(url, timeout=5) as r:
        return r.status, r.read()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    args = ap.parse_args(argv)
    cmd = [c for c in args.cmd if c != "--"]
    port = args.port or free_port()
    token = secrets.token_hex(16)
    env = dict(os.environ, JUPYTER_TOKEN=token)
    proc = subprocess.Popen(cmd + [f"PORT={port}"], env=env, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + args.timeout
    try:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                print(proc.stdout.read()[-3000:])
                print(f"labcheck: `{' '.join(cmd)}` exited {proc.returncode} before serving")
                return 1
            try:
                status, body = get(f"{base}/api/status?token={token}")
                lab_status, page = get(f"{base}/lab?token={token}")
            except OSError:
                time.sleep(1)
                continue
            info = json.loads(body)
            ok = status == 200 and lab_status == 200 and b"JupyterLab" in page
            print(f"labcheck: {base}/api/status -> {status} {info}; /lab -> {lab_status}"
                  f"{'' if ok else ' (not a JupyterLab page)'}")
            return 0 if ok else 1
        print(f"labcheck: no answer from {base} within {args.timeout:.0f} s")
        return 1
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=20)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(proc.pid, signal.SIGKILL)


if __name__ == "__main__":
    sys.exit(main())
