#!/usr/bin/env python3
"""Snapshot of every QEMU of a scale-bench session and of the host's CPU
(scripts/bench/scale-guest.sh, before and after each run).

Usage: scale-probe.py XENSIM_DIR "DOMID..." "QEMU_PID..." > snapshot.json
       scale-probe.py --io-count XENSIM_DIR "DOMID..." > BASE
       scale-probe.py --wait-io XENSIM_DIR "DOMID..." BASE

--io-count prints the requests each QEMU has served so far (JSON), taken
before fio starts; --wait-io returns once every QEMU has served more than
that (fio's jobs connect one guest after another: with 16 guests that
takes seconds), or after 60 s; its exit status says which (0, 1). The
count must come first: an idle guest does one read, perhaps before a
count taken after fio started, and then nothing.

Prints one JSON object:
  qemus    per domid: probe.py's snapshot of that guest's QEMU (QMP
           <XENSIM_DIR>/qmp-libxl-<domid>: query-blockstats and
           query-iothreads; /proc CPU and context switches of the process
           and of each IOThread)
  host     /proc/stat's aggregate "cpu" line in clock ticks: busy (all
           but idle and iowait) and total, over every CPU
  time     CLOCK_MONOTONIC seconds, taken after the QEMUs
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import probe  # noqa: E402  (scripts/bench/probe.py)


def host_cpu():
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal (guest* are in user)
    idle = fields[3] + fields[4]
    total = sum(fields[:8])
    return {"busy": total - idle, "total": total}


def requests(qmp_path):
    """Reads and writes the QEMU at qmp_path has served, over its disks."""
    q = probe.QMP(qmp_path)
    try:
        return sum(d["stats"]["rd_operations"] + d["stats"]["wr_operations"]
                   for d in q.cmd("query-blockstats"))
    finally:
        q.close()


def io_count(run_dir, domids):
    return {d: requests(os.path.join(run_dir, "qmp-libxl-%s" % d))
            for d in domids}


def wait_io(run_dir, domids, base_file, timeout=60.0):
    with open(base_file) as f:
        counts = json.load(f)
    base = {os.path.join(run_dir, "qmp-libxl-%s" % d): counts[d]
            for d in domids}
    deadline = time.monotonic() + timeout
    while base and time.monotonic() < deadline:
        time.sleep(0.1)
        base = {p: n for p, n in base.items() if requests(p) <= n}
    return not base


def main():
    if sys.argv[1] == "--io-count":
        json.dump(io_count(sys.argv[2], sys.argv[3].split()), sys.stdout)
        sys.stdout.write("\n")
        return
    if sys.argv[1] == "--wait-io":
        sys.exit(0 if wait_io(sys.argv[2], sys.argv[3].split(), sys.argv[4])
                 else 1)
    run_dir, domids, pids = sys.argv[1], sys.argv[2].split(), \
        [int(p) for p in sys.argv[3].split()]
    out = {"qemus": {}, "host": host_cpu(),
           "clk_tck": os.sysconf("SC_CLK_TCK")}
    for domid, pid in zip(domids, pids):
        out["qemus"][domid] = probe.snapshot(
            os.path.join(run_dir, "qmp-libxl-%s" % domid), pid)
    out["time"] = time.monotonic()
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
