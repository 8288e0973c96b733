#!/usr/bin/env python3
"""figures.py: steady-state figures of one tests/netns/swarm (or tests/harness) run.

  figures.py --summary SUMMARY.json [--samples FILE] [--rate MBIT] [--skip F] [--tail F]

SUMMARY is the harness's --summary file (its "dir" holds nI/metrics.jsonl
and nI/out.log; "launched" puts each node's metrics on the wall clock).
The steady window runs from the data stage's update after the first --skip
of them (default 0.25, at least the second) to the one before the last
--tail of them (default 0.2): start-up, joins and any start-up stall are
left out, so runs that stalled and runs that did not compare, and so is the
end, where the data stage has issued its last microbatch and the queues
drain (its own bytes_sent runs a window of microbatches ahead of the wire).
Prints one JSON object:
  tokens_per_s      data-stage tokens / s over the window
  window_s          its length; updates: how many updates it spans
  sent_per_s        {node: bytes_sent / s over the window (messages the node queued:
                    at the data stage this runs up to a window of microbatches ahead
                    of the wire)}
  recv_per_s        {node: bytes_recv / s over the window (messages delivered to it:
                    what its links carried, emulated or real)}; recv_total_per_s: their sum
  stage             {node: stage}
  up_per_s, down_per_s   {node: bytes / s through its tbf shapers (with --samples)}
  to_per_s          {"I>J": IP bytes / s node I sent to node J (with --samples)}
  util              {"I>J": to_per_s x 8 / rate, "I": up_per_s x 8 / rate (with --rate)}
  rtt_ms            the data stage's progress-line RTTs after its first two lines:
                    {"median", "max", "n"} (the mean over its peers, as printed)
"""
import argparse
import json
import os
import re
import statistics
import sys


def s_events(path):
    out = []
    try:
        with open(path) as f:
            for line in f:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
    except OSError:
        pass
    return out


def s_rate(points, a, b):
    """Slope of a cumulative counter [(t, v)] between times a and b, by linear interpolation."""
    pts = sorted(points)
    if len(pts) < 2 or b <= a:
        return None

    def at(t):
        if t <= pts[0][0]:
            return pts[0][1]
        for (t0, v0), (t1, v1) in zip(pts, pts[1:]):
            if t0 <= t <= t1:
                return v0 + (v1 - v0) * ((t - t0) / (t1 - t0) if t1 > t0 else 0)
        return pts[-1][1]
    return (at(b) - at(a)) / (b - a)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--summary", required=True)
    ap.add_argument("--samples")
    ap.add_argument("--rate", type=float)
    ap.add_argument("--skip", type=float, default=0.25)
    ap.add_argument("--tail", type=float, default=0.2)
    a = ap.parse_args()
    summ = json.load(open(a.summary))
    top = summ["dir"]
    per = summ["per_node"]
    out = {"sent_per_s": {}, "recv_per_s": {}, "stage": {}}

    nodes = {}
    for p in per:
        ev = s_events(os.path.join(top, "n%d" % p["node"], "metrics.jsonl"))
        nodes[p["node"]] = (p, ev)
        out["stage"][str(p["node"])] = p["stage"]
    data = [i for i, (p, ev) in nodes.items() if p["stage"] == 0]
    if not data:
        print(json.dumps({"error": "no data-stage node"}))
        return 1
    d = data[0]
    p0, ev0 = nodes[d]
    ups = [e for e in ev0 if e.get("event") == "update"]
    if len(ups) < 4 or p0.get("launched") is None:
        print(json.dumps({"error": "too few updates (%d) at the data stage" % len(ups)}))
        return 1
    k = max(2, int(len(ups) * a.skip))
    last = min(len(ups), max(k + 2, len(ups) - int(len(ups) * a.tail)))
    ua, ub = ups[k - 1], ups[last - 1]
    ta, tb = p0["launched"] + ua["t"], p0["launched"] + ub["t"]
    out["tokens_per_s"] = (ub["tokens"] - ua["tokens"]) / (tb - ta)
    out["window_s"] = tb - ta
    out["updates"] = last - k

    for i, (p, ev) in nodes.items():
        if p.get("launched") is None:
            continue
        for key in ("sent", "recv"):
            pts = [(p["launched"] + e["t"], e["bytes_" + key]) for e in ev
                   if e.get("event") == "update" and e.get("bytes_" + key) is not None]
            r = s_rate(pts, ta, tb)
            if r is not None:
                out[key + "_per_s"][str(i)] = r
    out["recv_total_per_s"] = sum(out["recv_per_s"].values())

    if a.samples:
        series = {}
        with open(a.samples) as f:
            for line in f:
                w = line.split()
                if len(w) != 4:
                    continue
                try:
                    series.setdefault((w[1], w[2]), []).append((float(w[0]), float(w[3])))
                except ValueError:
                    pass
        out["up_per_s"], out["down_per_s"], out["to_per_s"] = {}, {}, {}
        for (who, key), pts in series.items():
            r = s_rate(pts, ta, tb)
            if r is None:
                continue
            i = who.lstrip("n")
            if key == "up":
                out["up_per_s"][i] = r
            elif key == "down":
                out["down_per_s"][i] = r
            elif key.startswith("to:n"):
                out["to_per_s"]["%s>%s" % (i, key[4:])] = r
        if a.rate:
            cap = a.rate * 1e6 / 8
            out["util"] = {k: v / cap for k, v in out["to_per_s"].items()}
            out["util"].update({k: v / cap for k, v in out["up_per_s"].items()})

    rtts = []
    try:
        with open(os.path.join(top, "n%d" % d, "out.log"), errors="replace") as f:
            for line in f:
                m = re.search(r"\| rtt ([0-9.]+) ms", line)
                if m:
                    rtts.append(float(m.group(1)))
    except OSError:
        pass
    rtts = rtts[2:]
    if rtts:
        out["rtt_ms"] = {"median": statistics.median(rtts), "max": max(rtts), "n": len(rtts)}
    print(json.dumps(out, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
