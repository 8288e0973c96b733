"""ttl_table.py: the table of tests/bench/bench_ttl.sh from its work directory.

    python3 tests/bench/ttl_table.py WORK MB [TARGET] ["4 16 64"]

Reads WORK/nN-NAME.{out,jsonl,cmd} (one `brigade sim --compute real` run each)
and prints the Markdown fragment on stdout.  Per run:
- the validation curve: every data node (stage-0 node) evaluates its own
  replicas every few updates, and the replicas differ; the swarm's validation
  loss at a report is the mean of the last K reports, K the run's data nodes
  (its stage-0 nodes at their last update; fewer when the run made fewer
  reports: then only its end counts), from the first full window on, so one
  lucky replica does not reach the target for the swarm;
- the tokens: the microbatches the last stage had applied by a time (the growth
  of its nodes' update events' "tokens", 1,024 per microbatch of 8 x 128);
- the split the data stage chose (the plan event) and the share of the compute
  bound (the run's whole-run and steady-state lines).
Time to the target is the first point of the curve at or below it.
"""
import json
import math
import os
import re
import sys

TOKENS_PER_MB = 8 * 128
STAGES = 4


def load(work, tag):
    """One run's figures, or None when its output is missing."""
    out_p, js_p = os.path.join(work, tag + ".out"), os.path.join(work, tag + ".jsonl")
    if not os.path.exists(out_p) or not os.path.exists(js_p):
        return None
    out = open(out_p).read()
    updates, evals, split, prev, stage_of = [], [], None, {}, {}
    for line in open(js_p):
        try:
            e = json.loads(line)
        except ValueError:
            continue
        ev = e.get("event")
        if ev == "plan" and split is None:
            split = "%s (%s)" % (e.get("split"), e.get("how", ""))
        elif ev == "update":   # "tokens": the node's count so far (restarting if it changes stage)
            k = e.get("tokens", 0)
            d = k - prev.get(e["node"], 0)
            prev[e["node"]] = k
            stage_of[e["node"]] = e.get("stage")
            if e.get("stage") == STAGES - 1:
                updates.append((e["t"], d if d >= 0 else k))
        elif ev == "eval" and isinstance(e.get("val_loss"), (int, float)):
            evals.append((e["t"], e["val_loss"]))
    updates.sort()
    evals.sort()
    k = max(1, sum(1 for s in stage_of.values() if s == 0))
    curve = []   # (t, mean of the last k reports, lowest of them, highest of them), from the first full window
    for i in range(max(0, min(k, len(evals)) - 1), len(evals)):
        w = [l for _, l in evals[max(0, i - k + 1):i + 1]]
        curve.append((evals[i][0], sum(w) / len(w), min(w), max(w)))
    whole = re.search(r"applied at the last stage, [0-9.]+ per simulated s, ([0-9.]+)% of the compute bound", out)
    steady = re.search(r"steady state .*?, ([0-9.]+)% of the compute bound", out)
    last = re.search(r"^sim: (\d+) nodes, completed (\d+), .*sim ([0-9.]+) s in ([0-9.]+) s wall", out, re.M)
    cmd_p = os.path.join(work, tag + ".cmd")
    return {
        "tag": tag, "split": split or "-", "curve": curve, "updates": updates, "k": k, "evals": evals,
        "whole": float(whole.group(1)) if whole else None,
        "steady": float(steady.group(1)) if steady else None,
        "completed": int(last.group(2)) if last else None,
        "sim_s": float(last.group(3)) if last else None,
        "wall_s": float(last.group(4)) if last else None,
        "cmd": open(cmd_p).read().strip() if os.path.exists(cmd_p) else "-",
        "ok": bool(last),
    }


def tokens_by(run, t):
    """Microbatches the last stage had applied by simulated time t."""
    return sum(k for u, k in run["updates"] if u <= t + 1e-9) // TOKENS_PER_MB


def size(run):
    """The run's swarm size, from its tag nN-NAME."""
    return int(run["tag"][1:].split("-")[0])


def reach(run, target):
    """(simulated s, microbatches) at the first curve point at or below target, or None."""
    for t, l, _, _ in run["curve"]:
        if l <= target + 1e-12:
            return t, tokens_by(run, t)
    return None


def final_loss(run):
    return run["curve"][-1][1] if run["curve"] else math.nan


def fmt(x, f="%.1f"):
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f % x


def main():
    work, mb = sys.argv[1], int(sys.argv[2])
    target_arg = sys.argv[3] if len(sys.argv) > 3 else ""
    nodes = [int(n) for n in (sys.argv[4] if len(sys.argv) > 4 else "4 16 64").split()]
    tags = sorted((f[:-4] for f in os.listdir(work) if re.match(r"n\d+-.*\.out$", f)),
                  key=lambda s: (int(s[1:].split("-")[0]), s.split("-", 1)[1] != "default", s))
    runs = [r for r in (load(work, t) for t in tags) if r and size(r) in nodes]
    done = [r for r in runs if r["curve"]]
    if not done:
        print("bench_ttl: no run has evaluations in %s" % work, file=sys.stderr)
        return 1
    targets = {}
    for r in done:   # per swarm size: the highest final loss of its runs, rounded up (every run of the size reaches it)
        n = size(r)
        targets[n] = float(target_arg) if target_arg else max(targets.get(n, 0), math.ceil(final_loss(r) * 100) / 100)
    print("## Time to loss: the default against alternatives at 4, 16 and 64 nodes (issue 48)")
    print()
    print("`TTL_BENCH=1 sh tests/bench/bench_ttl.sh`: `brigade sim --compute real` (the real engine on the simulated")
    print("network and clock), gpt-small on the fortunes text, 4 stages, batch 8, lr 1e-3, seed 1, 25 ms links, 100 Mbit/s")
    print("uplinks, %d microbatches (%d tokens) per run, validation (8 held-out batches, the same for every run) every" % (mb, mb * TOKENS_PER_MB))
    print("32 microbatches of each data node. Each data node evaluates its own replicas; the swarm's val loss at a report is")
    print("the mean of the last K reports, K the run's data nodes (stage-0 nodes). Target: %s." % (
        "val loss %s for every size" % target_arg if target_arg else
        "per swarm size, the highest final val loss of its runs, rounded up to 0.01 (every run of the size reaches it)"))
    print()
    print("| nodes | options | split | data nodes | target | sim s to it | microbatches to it | val loss at the end (%d mb): mean of K [range] | the run's last report | compute bound: whole run / steady | sim s in all | wall s |" % mb)
    print("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in runs:
        n, name = r["tag"][1:].split("-", 1)
        target = targets.get(int(n))
        hit = reach(r, target) if r["curve"] and target is not None else None
        end = r["curve"][-1] if r["curve"] else None
        print("| %s | %s | %s | %d | %s | %s | %s | %s | %s | %s / %s%% | %s | %s |" % (
            n, name, r["split"].split(" ")[0], r["k"], fmt(target, "%.2f"), fmt(hit[0]) if hit else "not reached",
            hit[1] if hit else "-",
            "%.4f [%.3f..%.3f]" % (end[1], end[2], end[3]) if end else "-", fmt(r["evals"][-1][1] if r["evals"] else None, "%.4f"),
            fmt(r["whole"]), fmt(r["steady"]),
            fmt(r["sim_s"]), fmt(r["wall_s"], "%.0f")))
    print()
    print("Commands (WORK is the script's work directory):")
    print()
    for r in runs:
        print("    " + r["cmd"].replace(work + "/", "WORK/") if r["cmd"] != "-" else "    %s: -" % r["tag"])
    print()
    print("The split each run's data stage chose (its plan event):")
    print()
    for r in runs:
        print("- %s: %s" % (r["tag"], r["split"]))
    print()
    print("Every validation report (simulated s: val loss), per run:")
    print()
    for r in runs:
        pts = ", ".join("%.1f: %.3f" % (t, l) for t, l in r["evals"])
        print("- %s: %s" % (r["tag"], pts or "-"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
