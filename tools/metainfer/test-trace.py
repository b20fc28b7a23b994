#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""Check a `metainfer trace` file against the jobs of a known run.

    test-trace.py TRACE.json JOBS.list

JOBS.list is what bpf/tests/mistall-load wrote (one or several loads at
once): one "KIND DEV CTX QUEUE SEQNO STATUS PID" line per job; a job is
known by its submitter, device, queue, context and seqno.  Checks that the file is a well-formed Chrome
trace-event JSON object (known phases, the fields each needs), that the
timed events are in timestamp order, that the slices ("X") of each track
nest (never partly overlap; runs of one queue do not even nest), that
each async wait ("b"/"e") opens and closes once, that every device and
queue with events is named in metadata, that each device of the run has
the four counter tracks, and that every job of the list appears exactly
once as a run slice and once as a wait (with its status), and no other
job does.  The planted stalls must show as such: the hung job runs >= 1 s
and has a timeout instant, the job behind it waits >= 1 s.  Exits 1 with
one line per problem.
"""
import json
import sys

EPS = 0.002  # us: ts/dur are printed with 3 decimals


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    errors = []

    def err(msg):
        if len(errors) < 50:
            errors.append(msg)

    with open(sys.argv[1]) as f:
        try:
            doc = json.load(f)
        except ValueError as e:
            print("not valid JSON: %s" % e)
            return 1
    jobs = {}
    with open(sys.argv[2]) as f:
        for n, line in enumerate(f, 1):
            if len(line.split()) != 7:
                print("%s:%d: not 'KIND DEV CTX QUEUE SEQNO STATUS PID'" % (sys.argv[2], n))
                return 2
            kind, dev, ctx, queue, seqno, status, pid = line.split()
            key = (int(pid), int(dev), int(queue), int(ctx), int(seqno))
            jobs[key] = (kind, int(status))
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        print("no traceEvents list")
        return 1
    events = doc["traceEvents"]
    need = {"X": ("ts", "dur", "tid"), "b": ("ts", "id", "cat", "tid"),
            "e": ("ts", "id", "cat", "tid"), "C": ("ts", "args"),
            "i": ("ts", "tid"), "M": ("args",)}
    last_ts = None
    names = {}
    thread_names = set()
    slices = {}
    asyncs = {}
    counters = {}
    timeouts = set()
    for n, e in enumerate(events):
        if not isinstance(e, dict) or e.get("ph") not in need:
            err("event %d: unknown phase: %r" % (n, e))
            continue
        ph = e["ph"]
        if not isinstance(e.get("name"), str) or not isinstance(e.get("pid"), int):
            err("event %d: no name/pid: %r" % (n, e))
            continue
        missing = [k for k in need[ph] if k not in e]
        if missing:
            err("event %d (%s): missing %s" % (n, ph, missing))
            continue
        if ph == "M":
            if e["name"] == "process_name":
                names[e["pid"]] = e["args"].get("name")
            elif e["name"] == "thread_name":
                thread_names.add((e["pid"], e.get("tid")))
            continue
        ts = e["ts"]
        if not isinstance(ts, (int, float)) or ts < 0:
            err("event %d: bad ts %r" % (n, ts))
            continue
        if last_ts is not None and ts < last_ts:
            err("event %d: ts %.3f before the previous event's %.3f" % (n, ts, last_ts))
        last_ts = ts
        if ph == "X":
            if not isinstance(e["dur"], (int, float)) or e["dur"] < 0:
                err("event %d: bad dur %r" % (n, e["dur"]))
                continue
            slices.setdefault((e["pid"], e["tid"]), []).append(e)
        elif ph in "be":
            a = asyncs.setdefault((e["cat"], e["id"]), {"b": [], "e": []})
            a[ph].append(e)
        elif ph == "C":
            vals = e["args"]
            if not vals or not all(isinstance(v, (int, float)) for v in vals.values()):
                err("event %d: counter without numeric values: %r" % (n, e))
            counters.setdefault(e["pid"], {}).setdefault(e["name"], 0)
            counters[e["pid"]][e["name"]] += 1
        elif ph == "i":
            timeouts.add((e["pid"], e["tid"], e["name"]))

    # run slices nest per track
    for track, lst in slices.items():
        stack = []
        for s in sorted(lst, key=lambda s: (s["ts"], -s["dur"])):
            while stack and s["ts"] >= stack[-1]["ts"] + stack[-1]["dur"] - EPS:
                stack.pop()
            if stack and s["ts"] + s["dur"] > stack[-1]["ts"] + stack[-1]["dur"] + EPS:
                err("track %s: slice %r at %.3f overlaps %r without nesting"
                    % (track, s["name"], s["ts"], stack[-1]["name"]))
            elif stack and s.get("cat") == "run" and stack[-1].get("cat") == "run":
                # a queue runs one job at a time: runs never even nest
                err("track %s: job %r runs inside job %r" % (track, s["name"], stack[-1]["name"]))
            stack.append(s)
        if track not in thread_names:
            err("track %s has no thread_name" % (track,))
    for pid in set(p for p, _ in slices) | set(counters):
        if not names.get(pid):
            err("pid %d has no process_name" % pid)

    # async waits: one begin, one end, in order, same name and track
    waits = {}
    for (cat, id_), a in asyncs.items():
        if len(a["b"]) != 1 or len(a["e"]) != 1:
            err("async %s/%s: %d begins, %d ends" % (cat, id_, len(a["b"]), len(a["e"])))
            continue
        b, e = a["b"][0], a["e"][0]
        if (b["name"], b["pid"], b["tid"]) != (e["name"], e["pid"], e["tid"]) or e["ts"] < b["ts"]:
            err("async %s/%s: end does not match its begin" % (cat, id_))
            continue
        args = b.get("args", {})
        key = (args.get("submitter_tid"), b["pid"], b["tid"], args.get("ctx"),
               args.get("seqno"))
        if cat == "wait":
            if key in waits:
                err("job %s: two waits" % (key,))
            waits[key] = e["ts"] - b["ts"]

    # every job of the run exactly once, nothing else
    runs = {}
    for (pid, tid), lst in slices.items():
        for s in lst:
            args = s.get("args", {})
            key = (args.get("submitter_tid"), pid, tid, args.get("ctx"),
                   args.get("seqno"))
            if key in runs:
                err("job %s: two run slices" % (key,))
            runs[key] = s
    for key, (kind, status) in jobs.items():
        s = runs.get(key)
        if s is None:
            err("%s job %s: no run slice" % (kind, key))
            continue
        if key not in waits:
            err("%s job %s: no wait" % (kind, key))
        if s["args"].get("status") != status or not s["args"].get("finished"):
            err("%s job %s: status %r, expected %d" % (kind, key, s["args"].get("status"), status))
        if kind == "hang":
            if s["dur"] < 1e6:
                err("hung job %s: ran only %.0f us" % (key, s["dur"]))
            if not any(p == key[1] and t == key[2] and n.startswith("timeout")
                       for p, t, n in timeouts):
                err("hung job %s: no timeout instant" % (key,))
        if kind == "behind" and waits.get(key, 0) < 1e6:
            err("job %s behind the hung one: waited only %.0f us" % (key, waits.get(key, 0)))
    for key in set(runs) | set(waits):
        if key not in jobs:
            err("job %s is not one of the run's" % (key,))
    for dev in set(k[1] for k in jobs):
        for c in ("temperature_C", "clock_MHz", "power_mW", "queue_depth"):
            if not counters.get(dev, {}).get(c):
                err("device %d: no %s counter samples" % (dev, c))

    if errors:
        for e in errors:
            print(e)
        return 1
    print("%d jobs once each, %d events, %d counter samples, %d tracks: valid"
          % (len(jobs), len(events), sum(sum(c.values()) for c in counters.values()),
             len(slices)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
