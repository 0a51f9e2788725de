"""The two-GPU half of nvbw_compare: nvbandwidth's peer matrices, entry by entry, against the course.

nvbandwidth -j writes each testcase's values as `bandwidth_matrix`, a list of rows of strings
("N/A" where a pair was not measured) and `sum`, the sum of every entry of the last matrix
(json_output.cpp `JsonOutput::addTestcaseResults`). A testcase that reports several matrices
(the bidirectional ones: ..._read1/_read2/_total, testcases_ce.cpp) appends each one's rows to
the same `bandwidth_matrix`, so a d2d testcase on N GPUs has k x N rows of N values, the k-th
block being its k-th matrix; `sum` is then the total matrix's. Row r, column c of a peer
testcase is one ordered pair:

- device_to_device_memcpy_read_ce / _sm: GPU r reads GPU c's memory (data c -> r, issued by r);
- device_to_device_memcpy_write_ce: GPU r writes into GPU c (data r -> c, issued by r);
- device_to_device_bidirectional_memcpy_read_ce / _write_ce: both at once, the total block;
- device_to_device_latency_sm: GPU r chases pointers in GPU c's memory (ns per read);
- device_local_copy: one row, column d is GPU d copying within itself.

The course's side: p2p.matrices' `nvbw_size` rows (the same four CE testcases and the SM read, same row and
column meaning, at nvbandwidth's buffer size), p2p.peer_read_latency's peer pairs, and
p2p.d2d_copy's copy-engine copy when it ran at 256 MiB. A recording without them (a one-GPU
machine folder) simply has no peer figures. The bar for these figures is 1% (issue 42).
"""

from __future__ import annotations

import statistics

PEER_BAR = 0.01
NVBW_MIB = 256  # the size the course measures peer copies at: run nvbandwidth with -b 256
TESTS = {"read": "device_to_device_memcpy_read_ce", "write": "device_to_device_memcpy_write_ce",
            "bidir_read": "device_to_device_bidirectional_memcpy_read_ce",
            "bidir_write": "device_to_device_bidirectional_memcpy_write_ce",
            "sm_read": "device_to_device_memcpy_read_sm"}
WORDS = {"read": "CE read, GPU {r} pulls from GPU {c}", "write": "CE write, GPU {r} pushes to GPU {c}",
         "bidir_read": "CE both ways (read), GPU {r} <-> {c}, total", "bidir_write": "CE both ways (write), GPU {r} <-> {c}, total",
         "sm_read": "SM read, GPU {r}'s SMs copy from GPU {c}"}
LATENCY = "device_to_device_latency_sm"
LOCAL = "device_local_copy"


def copy_name(test: str, r: int, c: int) -> str:
    return WORDS[test].format(r=r, c=c) + f", {NVBW_MIB} MiB (GB/s)"


def latency_name(r: int, c: int) -> str:
    return f"GPU {r} reads GPU {c}'s memory, pointer chase (ns)"


def local_name(d: int) -> str:
    return f"CE copy within GPU {d}, {NVBW_MIB} MiB, bytes counted once (GB/s)"


def matrices(tc: dict) -> list[list[list[float | None]]]:
    """A testcase's `bandwidth_matrix` split into its matrices (blocks of as many rows as columns,
    or the one row of a 1 x N testcase); "N/A" becomes None."""
    rows = [[_value(tc, v) for v in row] for row in tc.get("bandwidth_matrix", [])]
    if not rows:
        return []
    n = len(rows[0])
    if any(len(row) != n for row in rows):
        raise ValueError(f"{tc.get('name')}: bandwidth_matrix rows of different lengths: not nvbandwidth -j output")
    if len(rows) == 1 or len(rows) % n:
        return [rows]
    return [rows[k:k + n] for k in range(0, len(rows), n)]


def _value(tc: dict, v) -> float | None:
    """One matrix entry: "N/A" is None, anything else must be a number."""
    if str(v).strip() == "N/A":
        return None
    try:
        return float(v)
    except (TypeError, ValueError):
        raise ValueError(f"{tc.get('name')}: bandwidth_matrix entry {v!r} is neither a number nor N/A") from None


def nvbw_figures(doc: dict) -> dict[str, float]:
    """Figure name -> value for every peer entry one nvbandwidth -j run measured (passed testcases only)."""
    by = {tc.get("name"): tc for tc in doc.get("nvbandwidth", doc).get("testcases", [])
          if str(tc.get("status", "")).lower() in ("passed", "pass")}
    out = {}
    for test, name in TESTS.items():
        if name in by and (ms := matrices(by[name])):
            out.update(_entries(ms[-1], lambda r, c, t=test: copy_name(t, r, c)))  # the bidirectional total is the last block
    if LATENCY in by and (ms := matrices(by[LATENCY])):
        out.update(_entries(ms[0], latency_name))
    if LOCAL in by and (ms := matrices(by[LOCAL])):
        out.update({local_name(d): v for d, v in enumerate(ms[0][0]) if v is not None})
    return out


def _entries(matrix: list[list[float | None]], name) -> dict[str, float]:
    return {name(r, c): v for r, row in enumerate(matrix) for c, v in enumerate(row) if r != c and v is not None}


def course_figures(exps: dict) -> dict[str, float]:
    """Figure name -> value for every peer figure one recording (experiment id -> data) has."""
    out = {}
    size = (exps.get("p2p.matrices") or {}).get("nvbw_size")
    if size and size.get("nbytes") == NVBW_MIB << 20:
        out.update({copy_name(row["test"], row["row"], row["col"]): float(row["gbps"]) for row in size["rows"]})
    for p in (exps.get("p2p.peer_read_latency") or {}).get("peer", []):
        out[latency_name(p["reader"], p["memory"])] = float(p["median_ns"])
    d2d = exps.get("p2p.d2d_copy")
    if d2d and d2d.get("nbytes") == NVBW_MIB << 20:
        out[local_name(0)] = d2d["nbytes"] / statistics.median(d2d["times_s"]["copy engine"]) / 1e9
    return out
