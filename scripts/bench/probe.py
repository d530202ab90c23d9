#!/usr/bin/env python3
"""Snapshot of QEMU's counters, taken by the guest side of a bench session
before and after each fio run (scripts/bench/guest.sh).

Usage: probe.py QMP_SOCKET QEMU_PID > snapshot.json
       probe.py --tapdisk TAPDISK_PID > snapshot.json

Prints one JSON object:
  blockstats  query-blockstats, per device (qdev path), the raw "stats"
  iothreads   query-iothreads, per id: thread-id, poll-max-ns, and the
              thread's utime/stime (clock ticks, /proc/<tid>/stat) and
              voluntary/nonvoluntary context switches (/proc/<tid>/status),
              cpu_ns: its CPU time in ns (schedstat)
  qemu        the whole process: utime/stime ticks (/proc/<pid>/stat);
              cpu_ns of the main thread only (schedstat is per task)
  clk_tck     ticks per second
  time        CLOCK_MONOTONIC seconds

A tapdisk (the bench's tapdisk arm) is one thread that does what the
disk's IOThread does in QEMU: --tapdisk gives the same object with that
thread under iothreads["xvda"] (poll-max-ns null: tapdisk's polling is
the VBD's polling-duration), the process under "qemu", and blockstats
null (tapdisk has no query-blockstats; the analysis leaves the
block-layer metric out).

QMP (the libxl-cmd monitor xensim gives QEMU) serves one client at a time;
the session's guest script is its only client.
"""
import json
import os
import socket
import sys
import time


class QMP:
    def __init__(self, path, timeout=10.0):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(path)
        self.f = self.sock.makefile("rwb")
        self._read()                     # greeting
        self.cmd("qmp_capabilities")

    def _read(self):
        line = self.f.readline()
        if not line:
            raise RuntimeError("QMP: connection closed")
        return json.loads(line)

    def cmd(self, name, **args):
        msg = {"execute": name}
        if args:
            msg["arguments"] = args
        self.f.write(json.dumps(msg).encode() + b"\n")
        self.f.flush()
        while True:
            rsp = self._read()
            if "return" in rsp:
                return rsp["return"]
            if "error" in rsp:
                raise RuntimeError("QMP %s: %s" % (name, rsp["error"]))
            # asynchronous events are skipped

    def close(self):
        self.sock.close()


def proc_stat(path):
    """utime, stime (ticks) from a /proc stat file."""
    with open(path) as f:
        # comm may contain spaces: split after the closing parenthesis
        rest = f.read().rsplit(")", 1)[1].split()
    return int(rest[11]), int(rest[12])


def proc_cpu_ns(path):
    """CPU time in ns from a schedstat file (0 if the kernel has none)."""
    try:
        with open(path) as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


def proc_ctxt(path):
    vol = nonvol = 0
    with open(path) as f:
        for line in f:
            if line.startswith("voluntary_ctxt_switches:"):
                vol = int(line.split()[1])
            elif line.startswith("nonvoluntary_ctxt_switches:"):
                nonvol = int(line.split()[1])
    return vol, nonvol


def snapshot(qmp_path, qemu_pid):
    q = QMP(qmp_path)
    try:
        blk = q.cmd("query-blockstats")
        iots = q.cmd("query-iothreads")
    finally:
        q.close()
    out = {"time": time.monotonic(), "clk_tck": os.sysconf("SC_CLK_TCK"),
           "blockstats": {}, "iothreads": {}}
    for b in blk:
        key = b.get("qdev") or b.get("device") or b.get("node-name", "?")
        out["blockstats"][key] = b.get("stats", {})
    for t in iots:
        tid = t["thread-id"]
        # /proc/PID/task/TID: the thread's own counters (/proc/TID/stat
        # would give the whole process's times)
        task = "/proc/%d/task/%d" % (qemu_pid, tid)
        ut, st = proc_stat(task + "/stat")
        vol, nonvol = proc_ctxt(task + "/status")
        out["iothreads"][t["id"]] = {
            "thread-id": tid, "poll-max-ns": t.get("poll-max-ns"),
            "utime": ut, "stime": st, "cpu_ns": proc_cpu_ns(task + "/schedstat"),
            "vol_ctxt": vol, "nonvol_ctxt": nonvol}
    ut, st = proc_stat("/proc/%d/stat" % qemu_pid)
    out["qemu"] = {"pid": qemu_pid, "utime": ut, "stime": st,
                   "cpu_ns": proc_cpu_ns("/proc/%d/schedstat" % qemu_pid)}
    return out


def tapdisk_snapshot(pid):
    task = "/proc/%d/task/%d" % (pid, pid)
    ut, st = proc_stat(task + "/stat")
    vol, nonvol = proc_ctxt(task + "/status")
    put, pst = proc_stat("/proc/%d/stat" % pid)
    return {"time": time.monotonic(), "clk_tck": os.sysconf("SC_CLK_TCK"),
            "blockstats": None,
            "iothreads": {"xvda": {
                "thread-id": pid, "poll-max-ns": None, "utime": ut,
                "stime": st, "cpu_ns": proc_cpu_ns(task + "/schedstat"),
                "vol_ctxt": vol, "nonvol_ctxt": nonvol}},
            "qemu": {"pid": pid, "utime": put, "stime": pst,
                     "cpu_ns": proc_cpu_ns("/proc/%d/schedstat" % pid)}}


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--tapdisk":
        json.dump(tapdisk_snapshot(int(sys.argv[2])), sys.stdout)
        sys.stdout.write("\n")
        return
    if len(sys.argv) >= 3 and sys.argv[1] == "--qom-set-poll":
        # probe.py --qom-set-poll QMP ID NS: set an IOThread's poll-max-ns
        q = QMP(sys.argv[2])
        q.cmd("qom-set", path="/objects/" + sys.argv[3],
              property="poll-max-ns", value=int(sys.argv[4]))
        q.close()
        return
    json.dump(snapshot(sys.argv[1], int(sys.argv[2])), sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
