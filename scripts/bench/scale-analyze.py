#!/usr/bin/env python3
"""Analysis of a scale-bench run (scripts/bench-scale.sh): raw/ ->
results.json, results.md, chart.dat + chart.gp (gnuplot makes chart.png).

Usage: scale-analyze.py OUTDIR          write the results
       scale-analyze.py --check OUTDIR  assert the results exist and are
                                        sane (CI: the pipeline, never speed)

raw/rNN/<arm>/n<N>-<workload>.*: one run of N guests at once: fio's JSON
(json+, one job per guest), the engine's counters per guest
(.xen.<domid>.json), and scale-probe.py snapshots of every QEMU of the
session before and after (.pre.json/.post.json). raw/idleNN/<arm>/
n<N>-idle.* and n<N>-light.*: the idle-cost runs, whose snapshots span a
fixed window inside the run.

Per run: aggregate IOPS and MB/s (sum over guests; fio's, ramp excluded),
p50, p99 and mean completion latency over all guests' I/Os (fio's clat
histograms merged), fairness (min/max per-guest IOPS), total QEMU CPU per
I/O (every QEMU of the session: utime + stime, which keep the time of
exited threads, over the engine's I/O count of all guests, ramp
included), the disks' IOThreads' CPU (schedstat), block-layer requests per
I/O, and the host's CPU utilisation (/proc/stat, both CPUs).

Ratios: per cell (N, workload) and repeat, arm/upstream on aggregate
IOPS; a cell is the median over the kept repeats (the first is
discarded), with the CV and the distribution-free 95% CI of the median of
analyze.py (docs/benchmarks.rst, Method).
"""
import glob
import json
import math
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from analyze import cv, load, median, median_ci95  # noqa: E402

ARMS_ORDER = ["upstream", "fork", "fork-32k", "fork-8ms"]
ARM_DESC = {
    "upstream": "pristine QEMU 10.2.2 (cannot poll)",
    "fork": "the full series, libxl disk at its default (the ring not "
            "polled; its IOThread at the IOThread default, as upstream's)",
    "fork-32k": "the fork, -object iothread,id=xvda,poll-max-ns=32768,"
                "poll-yield=on -global xen-disk.polling=on (the IOThread "
                "default)",
    "fork-8ms": "the fork, the same with poll-max-ns=8000000 (the seed's "
                "8 ms)",
}
WORKLOADS = ["rr4k-qd1", "rr4k-qd32", "rw4k-qd16", "sr1m-qd32", "mix"]
WL_DESC = {
    "rr4k-qd1": "4k randread QD1",
    "rr4k-qd32": "4k randread QD32",
    "rw4k-qd16": "4k randrw 70/30 QD16",
    "sr1m-qd32": "1m read QD32",
    "mix": "guest 1 4k randread QD1, the others 4k randread QD32",
}
RUN_RE = re.compile(r"^n([0-9]+)-([a-z0-9-]+)$")
IOTHREAD = "xvda"   # the libxl disk's IOThread (named by its vdev)


def clat_bins(d):
    """fio json+ completion-latency histogram of one direction:
    {ns: count}."""
    return {int(k): v for k, v in d.get("clat_ns", {}).get("bins",
                                                            {}).items()}


def percentile(bins, p):
    """p-th percentile (0..100) of a merged {ns: count} histogram, in us."""
    total = sum(bins.values())
    if not total:
        return None
    want, acc = total * p / 100.0, 0
    for ns in sorted(bins):
        acc += bins[ns]
        if acc >= want:
            return ns / 1e3
    return max(bins) / 1e3


def merge_bins(jobs):
    out = {}
    for job in jobs:
        for ddir in ("read", "write"):
            for ns, c in clat_bins(job[ddir]).items():
                out[ns] = out.get(ns, 0) + c
    return out


def mean_lat_us(jobs):
    n = sum(j[d]["total_ios"] for j in jobs for d in ("read", "write"))
    s = sum(j[d]["clat_ns"]["mean"] * j[d]["total_ios"]
            for j in jobs for d in ("read", "write") if j[d]["total_ios"])
    return s / n / 1e3 if n else None


def job_iops(job):
    return job["read"]["iops"] + job["write"]["iops"]


def qemu_deltas(pre, post):
    """Sums over every QEMU of the session: CPU seconds, the IOThreads'
    CPU seconds, block-layer requests (operations - merged)."""
    tck = post["clk_tck"]
    cpu = iot = 0.0
    ops = 0
    for domid, b in post["qemus"].items():
        a = pre["qemus"][domid]
        cpu += (b["qemu"]["utime"] + b["qemu"]["stime"] -
                a["qemu"]["utime"] - a["qemu"]["stime"]) / tck
        ta, tb = a["iothreads"].get(IOTHREAD), b["iothreads"].get(IOTHREAD)
        if ta and tb:
            iot += (tb["cpu_ns"] - ta["cpu_ns"]) / 1e9
        for dev, st in b["blockstats"].items():
            before = a["blockstats"].get(dev, {})
            for k, sign in (("rd_operations", 1), ("wr_operations", 1),
                            ("rd_merged", -1), ("wr_merged", -1)):
                ops += sign * (st.get(k, 0) - before.get(k, 0))
    host_busy = post["host"]["busy"] - pre["host"]["busy"]
    host_total = post["host"]["total"] - pre["host"]["total"]
    return {"qemu_cpu_s": cpu, "iothread_cpu_s": iot, "blk_requests": ops,
            "window_s": post["time"] - pre["time"],
            "host_util": host_busy / host_total if host_total else None}


def run_record(base, n, w):
    fj = load(base + ".fio.json")
    pre, post = load(base + ".pre.json"), load(base + ".post.json")
    jobs = sorted(fj["jobs"], key=lambda j: int(j["jobname"][1:]))
    if len(jobs) != n:
        raise ValueError("%d fio jobs, want %d" % (len(jobs), n))
    xen = [load("%s.xen.%d.json" % (base, g)) for g in range(1, n + 1)]
    ios = sum(x["ios"] for x in xen)
    per = [job_iops(j) for j in jobs]
    rec = {
        "n": n, "workload": w,
        "iops": sum(per),
        "mbps": sum(j["read"]["bw_bytes"] + j["write"]["bw_bytes"]
                    for j in jobs) / 1e6,
        "guest_iops": per,
        "fairness": min(per) / max(per) if max(per) > 0 else None,
        "lat_p50_us": percentile(merge_bins(jobs), 50),
        "lat_p99_us": percentile(merge_bins(jobs), 99),
        "lat_mean_us": mean_lat_us(jobs),
        "engine_ios": ios,
    }
    rec.update(qemu_deltas(pre, post))
    if ios:
        rec["qemu_cpu_us_per_io"] = rec["qemu_cpu_s"] * 1e6 / ios
        rec["iothread_cpu_us_per_io"] = rec["iothread_cpu_s"] * 1e6 / ios
        rec["blk_requests_per_io"] = rec["blk_requests"] / ios
    rec["poll_max_ns"] = sorted({
        q["iothreads"].get(IOTHREAD, {}).get("poll-max-ns")
        for q in post["qemus"].values()}, key=str)
    if w == "mix":
        rec["qd1_iops"] = per[0]
        rec["qd1_lat_p99_us"] = percentile(merge_bins(jobs[:1]), 99)
        rec["qd1_lat_mean_us"] = mean_lat_us(jobs[:1])
        rec["qd32_iops"] = sum(per[1:])
        rec["qd32_lat_p99_us"] = percentile(merge_bins(jobs[1:]), 99)
    if w in ("idle", "light"):
        win = rec["window_s"]
        # % of one CPU over the window: all QEMUs, and per disk
        rec["qemu_cpu_pct"] = 100 * rec["qemu_cpu_s"] / win
        rec["qemu_cpu_pct_per_disk"] = rec["qemu_cpu_pct"] / n
        rec["iothread_cpu_pct"] = 100 * rec["iothread_cpu_s"] / win
        rec["iothread_cpu_pct_per_disk"] = rec["iothread_cpu_pct"] / n
    return rec


def collect(out):
    runs = []
    for fio in sorted(glob.glob(os.path.join(out, "raw", "*", "*",
                                             "*.fio.json"))):
        arm = os.path.basename(os.path.dirname(fio))
        rdir = os.path.basename(os.path.dirname(os.path.dirname(fio)))
        rid = os.path.basename(fio)[:-len(".fio.json")]
        mm = RUN_RE.match(rid)
        if not mm:
            continue
        base = fio[:-len(".fio.json")]
        try:
            rec = run_record(base, int(mm.group(1)), mm.group(2))
        except (OSError, ValueError, KeyError) as e:
            print("scale-analyze: skipping incomplete run %s: %s" % (base, e),
                  file=sys.stderr)
            continue
        rec["arm"] = arm
        rec["idle"] = rdir.startswith("idle")
        rec["repeat"] = int(rdir[4:] if rec["idle"] else rdir[1:])
        runs.append(rec)
    return runs


METRICS = ["iops", "mbps", "lat_p50_us", "lat_p99_us", "lat_mean_us",
           "fairness",
           "qemu_cpu_us_per_io", "iothread_cpu_us_per_io",
           "blk_requests_per_io", "host_util", "qd1_iops", "qd1_lat_p99_us",
           "qd1_lat_mean_us", "qd32_iops", "qd32_lat_p99_us",
           "qemu_cpu_pct", "qemu_cpu_pct_per_disk", "iothread_cpu_pct",
           "iothread_cpu_pct_per_disk"]
RATIO_METRICS = ["iops", "qd1_iops", "qd32_iops"]
# lower is better: the ratio arm/upstream of these is a cost when > 1
LOWER_IS_BETTER_RATIOS = ["qd1_lat_p99_us", "qd1_lat_mean_us",
                          "lat_p50_us", "lat_p99_us", "qemu_cpu_us_per_io"]


def summarize(runs):
    grid = [r for r in runs if not r["idle"]]
    idx = {(r["arm"], r["n"], r["workload"], r["repeat"]): r for r in grid}
    repeats = sorted({r["repeat"] for r in grid})
    kept = [x for x in repeats if x > 1] or repeats
    seen = {r["arm"] for r in runs}
    arms = [a for a in ARMS_ORDER if a in seen] + \
        sorted(seen - set(ARMS_ORDER))
    cells = sorted({(r["n"], r["workload"]) for r in grid},
                   key=lambda c: (WORKLOADS.index(c[1])
                                  if c[1] in WORKLOADS else 99, c[0]))
    summary = {}
    for n, w in cells:
        for arm in arms:
            rs = [idx.get((arm, n, w, k)) for k in kept]
            rs = [x for x in rs if x]
            if not rs:
                continue
            s = {"n_repeats": len(rs)}
            for m in METRICS:
                vals = [x[m] for x in rs if x.get(m) is not None]
                s[m] = median(vals)
            for m in RATIO_METRICS + LOWER_IS_BETTER_RATIOS:
                ratios = []
                for k in kept:
                    a = idx.get((arm, n, w, k))
                    u = idx.get(("upstream", n, w, k))
                    if a and u and a.get(m) is not None and u.get(m):
                        ratios.append(a[m] / u[m])
                if not ratios:
                    continue
                s["ratio_" + m] = median(ratios)
                s["ratio_" + m + "_cv"] = cv(ratios)
                s["ratio_" + m + "_ci95"] = median_ci95(ratios)
                s["ratio_" + m + "_repeats"] = ratios
            s["iops_cv"] = cv([x["iops"] for x in rs])
            summary["%d/%s/%s" % (n, w, arm)] = s
    idle = {}
    for r in runs:
        if r["idle"]:
            key = "%d/%s/%s" % (r["n"], r["workload"], r["arm"])
            idle.setdefault(key, []).append(r)
    idle_summary = {}
    for key, rs in idle.items():
        s = {"n_repeats": len(rs)}
        for m in ("qemu_cpu_pct", "qemu_cpu_pct_per_disk", "iothread_cpu_pct",
                  "iothread_cpu_pct_per_disk", "iops", "lat_mean_us",
                  "host_util", "window_s", "blk_requests"):
            vals = [x[m] for x in rs if x.get(m) is not None]
            s[m] = median(vals)
            s[m + "_all"] = vals
        idle_summary[key] = s
    return summary, idle_summary, arms, cells, kept


def arm_desc(arm, meta):
    """An arm's description; an extra arm (BENCH_SCALE_EXTRA_ARMS) by its
    QEMU and poll-max-ns (meta/arm-<name>.txt)."""
    if arm in ARM_DESC:
        return ARM_DESC[arm]
    return "extra arm: %s" % meta.get("arm-" + arm, "?")


def fmt(x, nd=2):
    return "n/a" if x is None else "%.*f" % (nd, x)


def fmt_ratio(s, m="iops"):
    if not s or s.get("ratio_" + m) is None:
        return "n/a"
    c, ci = s.get("ratio_%s_cv" % m), s.get("ratio_%s_ci95" % m)
    return "%.2f (%s%s)" % (s["ratio_" + m],
                            "cv %.0f%%" % (100 * c) if c is not None else "-",
                            ", CI %.2f-%.2f" % tuple(ci) if ci else "")


def write_results(out):
    runs = collect(out)
    if not runs:
        sys.exit("scale-analyze: no runs under %s/raw" % out)
    meta = {}
    for f in sorted(os.listdir(os.path.join(out, "meta"))):
        with open(os.path.join(out, "meta", f)) as fh:
            meta[f[:-4] if f.endswith(".txt") else f] = fh.read().strip()
    cfg = dict(kv.split("=", 1) for line in meta.get("commands", "")
               .splitlines()[:3] for kv in line.split() if "=" in kv)
    summary, idle, arms, cells, kept = summarize(runs)
    crashes = []
    cpath = os.path.join(out, "crashes.txt")
    if os.path.exists(cpath):
        with open(cpath) as f:
            crashes = [line.strip() for line in f if line.strip()]
    res = {"config": cfg, "kept_repeats": kept,
           "arms": {a: arm_desc(a, meta) for a in arms}, "meta": meta,
           "crashes": crashes, "summary": summary, "idle": idle,
           "runs": runs}
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(res, f, indent=1, sort_keys=True)

    cpu = re.search(r"Model name:\s*(.*)", meta.get("lscpu", ""))
    g = lambda n, w, a: summary.get("%d/%s/%s" % (n, w, a))  # noqa: E731
    md = ["# xen-block scale benchmark", "",
          "N guests at once on one simulated host (one xenstored), each its "
          "own domain, its own QEMU started with libxl's command line and "
          "its own raw disk on tmpfs (libxl qdisk path); fio's xenblk "
          "engine, one job per guest, direct=1, ring order %s. Nothing "
          "pinned: guests, QEMUs and xenstored share the machine's %s CPUs."
          % (cfg.get("ring_order", "?"), meta.get("nproc", "?")), "",
          "- mode %s: %s repeats, repeat 1 discarded (kept: %s); fio ramp "
          "%s + %s measured per run (N = 1 rr4k-qd1: %s); "
          "arms interleaved seconds apart in every repeat, order rotated "
          "per cell"
          % (cfg.get("mode"), cfg.get("repeats"), ",".join(map(str, kept)),
             cfg.get("ramp"), cfg.get("runtime"),
             cfg.get("qd1_runtime", cfg.get("runtime"))),
          "- machine: %s, %s CPUs, %s; %s"
          % (cpu.group(1).strip() if cpu else "?", meta.get("nproc"),
             meta.get("meminfo", "").replace("MemTotal:", "RAM").strip(),
             meta.get("uname", "")),
          "- fio: %s; repository %s" % (meta.get("fio-version"),
                                        meta.get("repo")), "", "Arms:", ""]
    for a in arms:
        md.append("- **%s**: %s" % (a, arm_desc(a, meta)))
    md.append("")
    if crashes:
        md += ["**Session crashes** (restarted, run again; crashes.txt):",
               ""] + ["- " + c for c in crashes] + [""]
    md += ["Ratios: median over the kept repeats of the per-repeat ratio "
           "arm/upstream of the aggregate IOPS (all guests), with its CV "
           "and a distribution-free 95% confidence interval of the median "
           "(shown from 6 kept repeats up); beside it the same ratio of "
           "the CPU all QEMUs spent per I/O (below 1: cheaper than "
           "upstream). Where the guests share the CPUs unevenly (fairness "
           "far below 1), the aggregate IOPS depends on which guests got "
           "them, and the CPU per I/O is the steadier figure.", ""]
    ratio_arms = [a for a in arms if a != "upstream"]
    for w in [w for w in WORKLOADS if any(c[1] == w for c in cells)]:
        if w == "mix":
            continue
        md += ["## %s" % WL_DESC[w], "",
               "| N | upstream IOPS | " +
               " | ".join("%s / upstream | its QEMU CPU per I/O" % a
                          for a in ratio_arms) + " |",
               "|--:|--:|" + "--:|--:|" * len(ratio_arms)]
        for n, _ in [c for c in cells if c[1] == w]:
            u = g(n, w, "upstream")
            md.append("| %d | %s | %s |" % (
                n, fmt(u["iops"] if u else None, 0),
                " | ".join("%s | %s" % (
                    fmt_ratio(g(n, w, a)),
                    fmt_ratio(g(n, w, a), "qemu_cpu_us_per_io"))
                    for a in ratio_arms)))
        md += ["", "| N | arm | IOPS | MB/s | p50 us | p99 us | QEMU us/IO | "
               "IOThread us/IO | fairness | blk-req/IO | host CPU |",
               "|--:|:--|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]
        for n, _ in [c for c in cells if c[1] == w]:
            for a in arms:
                s = g(n, w, a)
                if s:
                    md.append("| %d | %s | %s | %s | %s | %s | %s | %s | %s "
                              "| %s | %s |" % (
                                  n, a, fmt(s["iops"], 0), fmt(s["mbps"], 1),
                                  fmt(s["lat_p50_us"], 1),
                                  fmt(s["lat_p99_us"], 1),
                                  fmt(s["qemu_cpu_us_per_io"]),
                                  fmt(s["iothread_cpu_us_per_io"]),
                                  fmt(s["fairness"]),
                                  fmt(s["blk_requests_per_io"]),
                                  fmt(100 * s["host_util"], 0) + "%"
                                  if s.get("host_util") is not None
                                  else "n/a"))
        md.append("")
    mix = [c for c in cells if c[1] == "mix"]
    for n, w in mix:
        md += ["## Polling under contention: N=%d, %s" % (n, WL_DESC[w]), "",
               "Ratios arm/upstream (median of per-repeat ratios, CV, CI); "
               "for latency a ratio above 1 is a slowdown.", "",
               "| arm | QD1 guest IOPS | QD1 p99 us | QD1 mean us | "
               "QD32 guests IOPS | QD1 IOPS ratio | QD1 p99 ratio | "
               "QD32 IOPS ratio | QEMU us/IO | host CPU |",
               "|:--|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]
        for a in arms:
            s = g(n, w, a)
            if not s:
                continue
            md.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                a, fmt(s["qd1_iops"], 0), fmt(s["qd1_lat_p99_us"], 1),
                fmt(s["qd1_lat_mean_us"], 1), fmt(s["qd32_iops"], 0),
                fmt_ratio(s, "qd1_iops") if a != "upstream" else "-",
                fmt_ratio(s, "qd1_lat_p99_us") if a != "upstream" else "-",
                fmt_ratio(s, "qd32_iops") if a != "upstream" else "-",
                fmt(s["qemu_cpu_us_per_io"]),
                fmt(100 * s["host_util"], 0) + "%"
                if s.get("host_util") is not None else "n/a"))
        md.append("")
    low = []
    for (n, w) in cells:
        for a in ratio_arms:
            s = g(n, w, a)
            if s and s.get("ratio_iops") is not None and s["ratio_iops"] < 1:
                ci = s.get("ratio_iops_ci95")
                low.append("- N=%d %s, %s: %s%s" % (
                    n, WL_DESC[w], a, fmt_ratio(s),
                    " (CI entirely below 1.00)" if ci and ci[1] < 1 else ""))
    md += ["## Cells below 1.00 against upstream", ""]
    md += low or ["None: every cell's median ratio is >= 1.00."]
    md.append("")
    if idle:
        md += ["## Idle cost", "",
               "CPU of every QEMU of the session, in % of one CPU, over a "
               "window that starts 1 s into the run: *idle*, N connected "
               "disks that did one read and then nothing; *light*, one 4k "
               "read every 1 ms per disk (fio rate_iops=1000). Medians over "
               "the idle repeats (all values in results.json).", "",
               "| arm | run | N | QEMU CPU % (all) | per disk | IOThread % "
               "per disk | IOPS (all) | mean lat us | host CPU |",
               "|:--|:--|--:|--:|--:|--:|--:|--:|--:|"]
        for a in arms:
            for key in sorted(idle, key=lambda k: (k.split("/")[1],
                                                   int(k.split("/")[0]))):
                n, w, arm = key.split("/")
                if arm != a:
                    continue
                s = idle[key]
                md.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                    a, w, n, fmt(s["qemu_cpu_pct"], 1),
                    fmt(s["qemu_cpu_pct_per_disk"], 2),
                    fmt(s["iothread_cpu_pct_per_disk"], 2),
                    fmt(s["iops"], 0) if w == "light" else "-",
                    fmt(s["lat_mean_us"], 1) if w == "light" else "-",
                    fmt(100 * s["host_util"], 0) + "%"
                    if s.get("host_util") is not None else "n/a"))
        md.append("")
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write("\n".join(md))

    # chart: one panel per workload, the aggregate IOPS ratio of each
    # fork arm against N, with its 95% CI (no CI: the repeats' range)
    panels = [w for w in WORKLOADS if w != "mix" and
              any(c[1] == w for c in cells)]
    ns = sorted({c[0] for c in cells if c[1] in panels})
    with open(os.path.join(out, "chart.dat"), "w") as f:
        for w in panels:
            for a in ratio_arms:
                f.write("# %s %s: N ratio lo hi\n" % (w, a))
                for n in ns:
                    s = g(n, w, a)
                    if not s or s.get("ratio_iops") is None:
                        continue
                    ci = s.get("ratio_iops_ci95") or (
                        min(s["ratio_iops_repeats"]),
                        max(s["ratio_iops_repeats"]))
                    f.write("%d %.4f %.4f %.4f\n" % (
                        ns.index(n), s["ratio_iops"], ci[0], ci[1]))
                f.write("\n\n")
    cols = 2 if len(panels) > 1 else 1
    rows = (len(panels) + cols - 1) // cols
    xt = ", ".join('"%d" %d' % (n, i) for i, n in enumerate(ns))
    gp = ['set terminal pngcairo size 1200,%d font ",10"' % (380 * rows + 60),
          'set output "chart.png"',
          'set multiplot layout %d,%d title "aggregate IOPS of N guests, '
          'fork arm / upstream QEMU (median of per-repeat ratios, 95%% CI)"'
          % (rows, cols),
          'set grid ytics', 'set yrange [0:*]', 'set xrange [-0.3:%g]'
          % (len(ns) - 0.7), 'set xtics (%s)' % xt,
          'set xlabel "guests (N)"', 'set ylabel "arm / upstream"',
          'set key top left',
          'set arrow 1 from graph 0, first 1 to graph 1, first 1 nohead '
          'dt 2 lw 2 lc rgb "black" front']
    for pi, w in enumerate(panels):
        gp.append('set title "%s"' % WL_DESC[w])
        plots = ['"chart.dat" index %d using ($1+%.2f):2:3:4 with '
                 'yerrorlines lw 2 title "%s"'
                 % (pi * len(ratio_arms) + j, (j - (len(ratio_arms) - 1) / 2)
                    * 0.06, a) for j, a in enumerate(ratio_arms)]
        gp.append("plot " + ", ".join(plots))
    gp.append("unset multiplot")
    with open(os.path.join(out, "chart.gp"), "w") as f:
        f.write("\n".join(gp) + "\n")
    print("scale-analyze: %d runs, %d cells, arms %s -> %s"
          % (len(runs), len(cells), ",".join(arms),
             os.path.join(out, "results.md")))


def check(out):
    """CI sanity: every cell of the grid ran on every arm with N guests
    that all moved data, the CPU and ratio figures are finite, the idle
    runs are there, and the files exist."""
    for f in ("results.json", "results.md", "chart.png"):
        p = os.path.join(out, f)
        assert os.path.isfile(p) and os.path.getsize(p) > 0, "missing " + p
    res = load(os.path.join(out, "results.json"))
    cfg = res["config"]
    want_n = [int(x) for x in cfg["n"].split(",")]
    want_w = cfg["workloads"].split(",")
    cells = {(n, w) for n in want_n for w in want_w}
    if cfg.get("mix_n"):
        cells.add((int(cfg["mix_n"]), "mix"))
    arms = list(res["arms"])
    assert "upstream" in arms and len(arms) >= 2, "arms: %s" % arms
    grid = [r for r in res["runs"] if not r["idle"]]
    for n, w in sorted(cells):
        for a in arms:
            rs = [r for r in grid if (r["n"], r["workload"], r["arm"]) ==
                  (n, w, a)]
            where = "N=%d %s %s" % (n, w, a)
            assert len(rs) == int(cfg["repeats"]), "runs of " + where
            for r in rs:
                assert len(r["guest_iops"]) == n and \
                    min(r["guest_iops"]) > 0, "a guest idle: " + where
                assert r["engine_ios"] > 0, "no guest I/O: " + where
                for k in ("qemu_cpu_us_per_io", "lat_p99_us", "fairness",
                          "blk_requests_per_io"):
                    v = r.get(k)
                    assert v is not None and math.isfinite(v) and v > 0, \
                        "bad %s: %s" % (k, where)
            if a != "upstream":
                s = res["summary"]["%d/%s/%s" % (n, w, a)]
                v = s.get("ratio_iops")
                assert v is not None and math.isfinite(v) and v > 0, \
                    "bad ratio: " + where
    idle = res["idle"]
    assert int(cfg["idle_repeats"]) == 0 or idle, "no idle runs"
    for key, s in idle.items():
        assert s["qemu_cpu_pct"] is not None and s["qemu_cpu_pct"] >= 0, \
            "bad idle CPU " + key
        if "/light/" in key:
            assert s["iops"] and s["iops"] > 0, "light load did no I/O " + key
            # the CPU window must lie inside the load, not before it
            assert min(s["blk_requests_all"]) > 0, \
                "no request in the light load's CPU window " + key
    md = open(os.path.join(out, "results.md")).read()
    assert "| N | upstream IOPS |" in md and "## Idle cost" in md
    with open(os.path.join(out, "chart.png"), "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n", "chart.png is not a PNG"
    print("bench-scale check: %d runs, %d cells x %d arms, %d idle "
          "figures: OK" % (len(res["runs"]), len(cells), len(arms),
                           len(idle)))


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--check":
        check(sys.argv[2])
    elif len(sys.argv) == 2:
        write_results(sys.argv[1])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
