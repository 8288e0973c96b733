#!/bin/sh
# bench_gpt2.sh: the engine at GPT-2 small's shape (vocabulary 50257, width
# 768, 12 blocks of 12 heads) with a context of 256, against PyTorch, one
# thread, best step of a few (a step there takes seconds on one core).
# Writes $RESULTS_DIR/15-gpt2.md.  Run by tests/bench/run.sh, or alone after
# `make bench`: BUILD=build sh tests/bench/bench_gpt2.sh
BUILD=${BUILD:-build}
RESULTS_DIR=${RESULTS_DIR:-tests/bench/results}
PY=${TORCH_PYTHON:-/usr/bin/python3}
B=${GPT2_BATCH:-1}; STEPS=${GPT2_STEPS:-3}
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
"$BUILD/bench/bench_train" --models gpt2 --ctx 256 --threads 1 --batch "$B" --steps "$STEPS" --warmup 1 >"$W/b.out" 2>&1 \
    || { echo "bench_gpt2: bench_train failed: $(tail -n 1 "$W/b.out")" >&2; exit 1; }
"$PY" tests/bench/torch_gpt.py --model gpt2 --ctx 256 --threads 1 --batch "$B" --steps "$STEPS" --warmup 1 >"$W/t.out" 2>&1
kv() { sed -n "s/^kv what=$2 .*$3=\([0-9.]*\).*/\1/p" "$1" | head -n 1; }
ours=$(kv "$W/b.out" train tok_s); theirs=$(kv "$W/t.out" torch tok_s)
ratio=$(python3 -c "print('%.2f' % ($ours / $theirs))" 2>/dev/null || echo "-")
{
    echo "## Engine at GPT-2's shape"
    echo
    echo "\`sh tests/bench/bench_gpt2.sh\`: one training step (forward, backward, clip, AdamW) of gpt2 with context"
    echo "256 (V 50257, C 768, 12 x 12 heads, untied head: 163M parameters), batch $B, 1 thread, best of $STEPS,"
    echo "by each one's thread CPU clock; the head runs on chunks of rows (no (B,T,V) logits)."
    echo
    echo "| engine | params | threads | B x T | best step ms | tokens/s | GFLOP/step | GFLOP/s | sgemm peak | of peak | loss |"
    echo "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|"
    grep '^| gpt2 ' "$W/b.out"
    echo
    echo "| PyTorch | model | params | threads | B x T | best step ms | tokens/s | loss | attention |"
    echo "|---|---|---:|---:|---|---:|---:|---:|---|"
    grep '^| torch ' "$W/t.out" || echo "| (torch skipped) | | | | | | | | |"
    echo
    echo "brigade / PyTorch tokens/s: **$ratio** (target at least 1.2, as gpt-small's)."
    echo "Load average when measured: $(cut -d' ' -f1-3 /proc/loadavg)."
} >"$RESULTS_DIR/15-gpt2.md"
cat "$RESULTS_DIR/15-gpt2.md"
