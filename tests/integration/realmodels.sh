#!/bin/sh
# realmodels.sh: token shards in, GPT-2 checkpoints in and out, checked
# against a PyTorch GPT-2 written here: brigade eval of a checkpoint torch
# wrote equals torch's loss; --init then training then export gives a model
# torch reads back with brigade's loss; llm.c's format too; export then
# import is bit-exact; shards train, split and are refused when bad (one
# line, exit 2).  Prints "ok - NAME" or "FAIL - NAME: why".
BRIGADE=${BRIGADE:-build/brigade}
PY=/usr/bin/python3
T=$(mktemp -d /tmp/brigade-realmodels.XXXXXX)
trap '[ -n "$KEEP" ] || rm -rf "$T"' EXIT
trap 'exit 1' INT TERM HUP
B="timeout 300 $BRIGADE"
ok() { echo "ok - $1"; }
bad() { echo "FAIL - $1: $2"; }
if ! $PY -c "import torch" 2>/dev/null; then
    echo "skip - realmodels: needs Debian's python3-torch"; exit 0
fi

cat >"$T/ref.py" <<'PY'
# A GPT-2 in plain torch (learned positions, pre-layernorm blocks, tanh GELU,
# causal attention, final layernorm, head tied unless lm_head.weight), with
# safetensors, llm.c files and token shards read and written by hand.
import json, struct, sys, array, collections
import torch
import torch.nn.functional as F

def st_write(path, sd):
    hdr, blobs, at = {}, [], 0
    for k, v in sd.items():
        b = v.contiguous().float().numpy().tobytes()
        hdr[k] = {"dtype": "F32", "shape": list(v.shape), "data_offsets": [at, at + len(b)]}
        blobs.append(b); at += len(b)
    h = json.dumps(hdr).encode(); h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))

def st_read(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    out = {}
    for k, v in json.loads(raw[8:8 + n]).items():
        if k == "__metadata__": continue
        a, b = v["data_offsets"]
        t = torch.frombuffer(bytearray(raw[8 + n + a:8 + n + b]), dtype=torch.float32).reshape(v["shape"])
        out[k[12:] if k.startswith("transformer.") else k] = t
    return out

def llmc_read(path):
    raw = open(path, "rb").read()
    magic, ver, T, V, L, NH, C, Vp = struct.unpack("<8i", raw[:32])
    assert magic == 20240326 and ver == 3
    x = torch.frombuffer(bytearray(raw[1024:]), dtype=torch.float32)
    at = 0
    def take(*shape):
        nonlocal at
        n = 1
        for s in shape: n *= s
        t = x[at:at + n].reshape(shape); at += n; return t
    sd = {"wte.weight": take(Vp, C)[:V], "wpe.weight": take(T, C)}
    names = [("ln_1.weight", (C,), 0), ("ln_1.bias", (C,), 0), ("attn.c_attn.weight", (3 * C, C), 1),
             ("attn.c_attn.bias", (3 * C,), 0), ("attn.c_proj.weight", (C, C), 1), ("attn.c_proj.bias", (C,), 0),
             ("ln_2.weight", (C,), 0), ("ln_2.bias", (C,), 0), ("mlp.c_fc.weight", (4 * C, C), 1),
             ("mlp.c_fc.bias", (4 * C,), 0), ("mlp.c_proj.weight", (C, 4 * C), 1), ("mlp.c_proj.bias", (C,), 0)]
    for name, shape, conv in names:
        stack = take(L, *shape)
        for l in range(L): sd[f"h.{l}.{name}"] = stack[l].T if conv else stack[l]
    sd["ln_f.weight"] = take(C); sd["ln_f.bias"] = take(C)
    assert at == x.numel()
    return sd, NH

def st_metadata(path):
    raw = open(path, "rb").read()
    return json.loads(raw[8:8 + struct.unpack("<Q", raw[:8])[0]]).get("__metadata__", {})

def cut_blocks(meta, L):
    """The blocks a bottleneck's cuts follow (brigade's even split of L blocks over bottleneck_stages)."""
    if "bottleneck" not in meta: return []
    K = int(meta["bottleneck_stages"]); assert meta["bottleneck_split"] == "even"
    ends, at = [], 0
    for k in range(K - 1):
        at += L // K + (1 if k < L % K else 0); ends.append(at - 1)
    return ends

def cut(sd, j, h):
    """SWARM's bottleneck: LayerNorm, Linear down, LayerNorm, then Linear up (nn.Linear's (out, in) weights)."""
    p = lambda n: sd[f"cut.{j}.{n}"]
    C, w = p("down.weight").shape[1], p("down.weight").shape[0]
    z = F.layer_norm(h, (C,), p("ln_1.weight"), p("ln_1.bias"), eps=1e-5)
    z = F.layer_norm(F.linear(z, p("down.weight"), p("down.bias")), (w,), p("ln_2.weight"), p("ln_2.bias"), eps=1e-5)
    return F.linear(z, p("up.weight"), p("up.bias"))

def loss(sd, x, y, heads, cuts=()):
    C = sd["wte.weight"].shape[1]; B, T = x.shape; hs = C // heads
    h = sd["wte.weight"][x] + sd["wpe.weight"][torch.arange(T)]
    causal = torch.ones(T, T).tril().bool()
    l = 0
    while f"h.{l}.ln_1.weight" in sd:
        if l - 1 in cuts: h = cut(sd, cuts.index(l - 1), h)
        p = lambda n: sd[f"h.{l}.{n}"]
        a = F.layer_norm(h, (C,), p("ln_1.weight"), p("ln_1.bias"), eps=1e-5)
        q, k, v = torch.addmm(p("attn.c_attn.bias"), a.reshape(B * T, C), p("attn.c_attn.weight")).reshape(B, T, 3, heads, hs).unbind(2)
        s = torch.einsum("bqhd,bkhd->bhqk", q, k) / hs ** 0.5
        w = s.masked_fill(~causal, float("-inf")).softmax(-1)
        o = torch.einsum("bhqk,bkhd->bqhd", w, v).reshape(B * T, C)
        h = h + torch.addmm(p("attn.c_proj.bias"), o, p("attn.c_proj.weight")).reshape(B, T, C)
        a = F.layer_norm(h, (C,), p("ln_2.weight"), p("ln_2.bias"), eps=1e-5).reshape(B * T, C)
        m = F.gelu(torch.addmm(p("mlp.c_fc.bias"), a, p("mlp.c_fc.weight")), approximate="tanh")
        h = h + torch.addmm(p("mlp.c_proj.bias"), m, p("mlp.c_proj.weight")).reshape(B, T, C)
        l += 1
    h = F.layer_norm(h, (C,), sd["ln_f.weight"], sd["ln_f.bias"], eps=1e-5)
    logits = h @ sd.get("lm_head.weight", sd["wte.weight"]).T
    return F.cross_entropy(logits.reshape(B * T, -1), y.reshape(-1), reduction="sum").item() / (B * T)

def held_out_loss(sd, toks, T, heads, cuts=()):
    k, tot = 0, 0.0
    while (k + 1) * T < len(toks):
        w = torch.tensor(toks[k * T:k * T + T + 1])
        tot += loss(sd, w[None, :-1], w[None, 1:], heads, cuts); k += 1
    return tot / k

def shard(path, toks, wide=False, magic=None, version=None, count=None):
    head = array.array("i", [0] * 256)
    head[0] = magic if magic is not None else (20240801 if wide else 20240520)
    head[1] = version if version is not None else (7 if wide else 1)
    head[2] = len(toks) if count is None else count
    with open(path, "wb") as f:
        f.write(head.tobytes()); f.write(array.array("I" if wide else "H", toks).tobytes())

def words(text, V):
    """A toy tokenizer: the V-256 most common words (with their space) are one id each, the rest bytes."""
    parts = text.split(" ")
    common = [w for w, _ in collections.Counter(parts).most_common(V - 256)]
    ids = {w: 256 + i for i, w in enumerate(common)}
    out = []
    for w in parts:
        out.extend([ids[w]] if w in ids else list((w).encode("utf-8", "replace")))
        out.append(32)
    return out

def tokenizer_file(path, text, V, magic=20240328):
    """llm.c's tokenizer file (version 2) of the toy tokenizer: the 256 bytes, then the common words."""
    common = [w for w, _ in collections.Counter(text.split(" ")).most_common(V - 256)]
    head = array.array("I", [0] * 256); head[0], head[1], head[2], head[3] = magic, 2, V, 10
    with open(path, "wb") as f:
        f.write(head.tobytes())
        for piece in [bytes([b]) for b in range(256)] + [(w.encode("utf-8", "replace") or b"?")[:255] for w in common]:
            f.write(bytes([len(piece)]) + piece)

def random_gpt2(V, T, C, L, seed):
    """Random weights under Hugging Face's names, with the "transformer." prefix its GPT2LMHeadModel writes."""
    g = torch.Generator().manual_seed(seed)
    n = lambda *s: 0.02 * torch.randn(*s, generator=g)
    sd = {"wte.weight": n(V, C), "wpe.weight": n(T, C), "ln_f.weight": 1 + n(C), "ln_f.bias": n(C)}
    for l in range(L):
        for k, v in {"ln_1.weight": 1 + n(C), "ln_1.bias": n(C), "attn.c_attn.weight": n(C, 3 * C),
                     "attn.c_attn.bias": n(3 * C), "attn.c_proj.weight": n(C, C), "attn.c_proj.bias": n(C),
                     "ln_2.weight": 1 + n(C), "ln_2.bias": n(C), "mlp.c_fc.weight": n(C, 4 * C),
                     "mlp.c_fc.bias": n(4 * C), "mlp.c_proj.weight": n(4 * C, C), "mlp.c_proj.bias": n(C)}.items():
            sd[f"h.{l}.{k}"] = v
    return {"transformer." + k: v for k, v in sd.items()}

def shard_tokens(path):
    raw = open(path, "rb").read()
    wide = struct.unpack("<i", raw[:4])[0] == 20240801
    return array.array("I" if wide else "H", raw[1024:]).tolist()

if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "make":
        d = sys.argv[2]
        text = open("/usr/share/common-licenses/GPL-3", errors="replace").read() * 3
        toks = words(text, 512)
        tokenizer_file(d + "/tok.bin", text, 512)
        tokenizer_file(d + "/badtok.bin", text, 512, magic=20240327)
        shard(d + "/shards/text_val_000000.bin", toks[:6000])
        shard(d + "/shards/text_train_000001.bin", toks[6000:40000])
        shard(d + "/shards/text_train_000002.bin", toks[40000:], wide=True)
        shard(d + "/nosplit/a.bin", toks[:20000])
        shard(d + "/nosplit/b.bin", toks[20000:40000], wide=True)
        st_write(d + "/init.safetensors", random_gpt2(512, 64, 64, 2, seed=3))
        st_write(d + "/init256.safetensors", random_gpt2(256, 64, 64, 2, seed=4))
    elif cmd == "loss-st":
        sd = st_read(sys.argv[2])
        L = sum(1 for k in sd if k.endswith(".ln_1.weight") and k.startswith("h."))
        cuts = cut_blocks(st_metadata(sys.argv[2]), L)
        print("%.8f" % held_out_loss(sd, shard_tokens(sys.argv[3]), 64, int(sys.argv[4]), cuts))
    elif cmd == "loss-llmc":
        sd, NH = llmc_read(sys.argv[2])
        print("%.8f" % held_out_loss(sd, shard_tokens(sys.argv[3]), sd["wpe.weight"].shape[0], NH))
    elif cmd == "bad":
        d, toks = sys.argv[2], list(range(300)) * 10
        shard(d + "/magic.bin", toks, magic=12345)
        shard(d + "/version.bin", toks, version=2)
        shard(d + "/count.bin", toks, count=len(toks) + 1)
        shard(d + "/wide_count.bin", toks, wide=True, count=len(toks) - 1)
        shard(d + "/vocab.bin", toks[:1500] + [600] + toks[1500:])
PY

mkdir -p "$T/shards" "$T/nosplit" "$T/bad"
if ! $PY "$T/ref.py" make "$T" 2>"$T/py.err"; then bad setup "$(tail -n 1 "$T/py.err")"; exit 1; fi
# close A B: |A - B| <= 1e-4 |B|
close() { $PY -c "import sys; a, b = float('$1'), float('$2'); sys.exit(0 if abs(a - b) <= 1e-4 * abs(b) else 1)"; }
ev() { $B eval --model-file "$1" --data "$2" --heads 4 2>"$T/eval.err" | sed -n 's/^val_loss //p'; }
VAL="$T/shards/text_val_000000.bin"
SHAPE="--vocab 512 --ctx 64 --dim 64 --layers 2 --heads 4"

# a checkpoint torch wrote: brigade's held-out loss is torch's
b0=$(ev "$T/init.safetensors" "tokens:$T/shards"); t0=$($PY "$T/ref.py" loss-st "$T/init.safetensors" "$VAL" 4)
if [ -n "$b0" ] && close "$b0" "$t0"; then ok "eval of a torch checkpoint: brigade $b0, torch $t0"
else bad "eval of a torch checkpoint" "brigade '$b0' ($(tail -n 1 "$T/eval.err")), torch $t0"; fi

# --init, training on shards (uint16 and uint32 together), export: torch reads the model and agrees
if $B solo $SHAPE --data "tokens:$T/shards" --init "$T/init.safetensors" --steps 20 --lr 3e-3 --batch 4 \
      --save "$T/m.bin" --metrics "$T/solo.jsonl" >"$T/solo.out" 2>&1 \
   && $B export "$T/m.bin" --format safetensors --out "$T/m.safetensors" >"$T/exp.out" 2>&1; then
    b1=$(ev "$T/m.bin" "tokens:$T/shards"); t1=$($PY "$T/ref.py" loss-st "$T/m.safetensors" "$VAL" 4)
    if [ -n "$b1" ] && close "$b1" "$t1" && $PY -c "import sys; sys.exit(0 if $b1 < $b0 else 1)"; then
        ok "train from --init on shards, export: brigade $b1, torch $t1 (from $b0)"
    else bad "train from --init, export" "brigade '$b1', torch '$t1', before $b0"; fi
    # __metadata__: the shape and the run id (the run's, in its solo's start event)
    run=$(sed -n 's/.*"run":"\([0-9a-f]*\)".*/\1/p' "$T/solo.jsonl" | head -n 1)
    meta=$($PY -c "
import json, struct; raw = open('$T/m.safetensors', 'rb').read(); n = struct.unpack('<Q', raw[:8])[0]
m = json.loads(raw[8:8 + n])['__metadata__']; print(m['n_vocab'], m['n_ctx'], m['n_embd'], m['n_layer'], m['n_head'], m['brigade_run'])")
    if [ -n "$run" ] && [ "$meta" = "512 64 64 2 4 $run" ]; then ok "export __metadata__: $meta"
    else bad "export __metadata__" "'$meta', run '$run'"; fi
    # sampling decodes with llm.c's tokenizer file; a model of tokens needs one, a bad one is one line
    $B sample --model-file "$T/m.bin" --tokenizer "$T/tok.bin" --prompt "the " --length 20 --seed 2 >"$T/smp.out" 2>&1; rc=$?
    $B sample --model-file "$T/m.bin" --length 5 >"$T/smp2.out" 2>&1; rc2=$?
    $B sample --model-file "$T/m.bin" --tokenizer "$T/badtok.bin" --length 5 >"$T/smp3.out" 2>&1; rc3=$?
    $B sample --model-file "$T/m.safetensors" --tokenizer "$T/tok.bin" --length 5 >/dev/null 2>"$T/smp4.out" || rc=4
    if [ $rc = 0 ] && [ "$(wc -c <"$T/smp.out")" -gt 24 ] && [ $rc2 = 2 ] && [ $rc3 = 2 ] \
       && grep -q tokenizer "$T/smp2.out" && grep -q "magic" "$T/smp3.out"; then
        ok "sample --tokenizer: $(wc -c <"$T/smp.out") bytes decoded"
    else bad "sample --tokenizer" "exit $rc $rc2 $rc3: $(cat "$T/smp.out" "$T/smp2.out" "$T/smp3.out" | head -c 300)"; fi
    # export then import: the same bits
    $B export "$T/m.safetensors" --format safetensors --out "$T/m2.safetensors" >/dev/null 2>&1
    if cmp -s "$T/m.safetensors" "$T/m2.safetensors"; then ok "safetensors export, import, export: bit-exact"
    else bad "safetensors round trip" "the second export differs"; fi
    # llm.c's format ties the head: a trained untied model is refused in one line
    $B export "$T/m.bin" --format llmc --out "$T/m.llmc" >"$T/l.out" 2>&1; rc=$?
    if [ $rc = 2 ] && [ "$(wc -l <"$T/l.out")" = 1 ] && [ ! -e "$T/m.llmc" ]; then ok "llmc export of an untied model: refused"
    else bad "llmc export of an untied model" "exit $rc: $(cat "$T/l.out")"; fi
else
    bad "train from --init, export" "$(tail -n 1 "$T/solo.out") $(tail -n 1 "$T/exp.out")"
fi

# a learned bottleneck at the cuts (--bottleneck): torch, given SWARM's layers and the exported cut.J.*
# tensors, agrees with brigade; the file reads back (eval) the same; llm.c's format refuses it in one line
if $B solo --vocab 512 --ctx 64 --dim 64 --layers 3 --heads 4 --data "tokens:$T/shards" --stages 3 --bottleneck 4 \
      --steps 20 --lr 3e-3 --batch 4 --codec int8 --grad-codec int8 --save "$T/bn.bin" >"$T/bn.out" 2>&1 \
   && $B export "$T/bn.bin" --format safetensors --out "$T/bn.safetensors" >"$T/bnexp.out" 2>&1; then
    b4=$(ev "$T/bn.bin" "tokens:$T/shards"); b5=$(ev "$T/bn.safetensors" "tokens:$T/shards")
    t4=$($PY "$T/ref.py" loss-st "$T/bn.safetensors" "$VAL" 4)
    names=$($PY -c "
import json, struct; raw = open('$T/bn.safetensors', 'rb').read(); h = json.loads(raw[8:8 + struct.unpack('<Q', raw[:8])[0]])
m = h['__metadata__']; print(m['bottleneck'], m['bottleneck_stages'], m['bottleneck_split'], h['cut.1.down.weight']['shape'], h['cut.1.up.weight']['shape'])")
    $B export "$T/bn.bin" --format llmc --out "$T/bn.llmc" >"$T/bnl.out" 2>&1; rc=$?
    if [ -n "$b4" ] && close "$b4" "$t4" && [ "$b4" = "$b5" ] && [ "$names" = "4 3 even [16, 64] [64, 16]" ] \
       && [ $rc = 2 ] && [ "$(wc -l <"$T/bnl.out")" = 1 ] && grep -q bottleneck "$T/bnl.out" && [ ! -e "$T/bn.llmc" ]; then
        ok "bottleneck export: brigade $b4, torch $t4, read back $b5; $names; llmc refused"
    else bad "bottleneck export" "brigade '$b4', torch '$t4', read back '$b5', '$names', llmc exit $rc: $(cat "$T/bnl.out")"; fi
else bad "bottleneck export" "$(tail -n 1 "$T/bn.out") $(tail -n 1 "$T/bnexp.out")"; fi

# llm.c's format: a tied checkpoint out and back; torch reads it with the same loss
if $B export "$T/init.safetensors" --heads 4 --format llmc --out "$T/a.llmc" >/dev/null 2>"$T/l.err" \
   && $B export "$T/a.llmc" --format safetensors --out "$T/b.safetensors" >/dev/null 2>>"$T/l.err" \
   && $B export "$T/b.safetensors" --format llmc --out "$T/c.llmc" >/dev/null 2>>"$T/l.err"; then
    t2=$($PY "$T/ref.py" loss-llmc "$T/a.llmc" "$VAL"); b2=$(ev "$T/a.llmc" "tokens:$T/shards")
    if cmp -s "$T/a.llmc" "$T/c.llmc" && [ -n "$b2" ] && close "$b2" "$t2" && close "$t2" "$t0"; then
        ok "llm.c export: torch $t2, brigade $b2; llmc -> safetensors -> llmc bit-exact"
    else bad "llm.c export" "torch '$t2', brigade '$b2', first $t0; round trip $(cmp "$T/a.llmc" "$T/c.llmc" 2>&1)"; fi
else bad "llm.c export" "$(tail -n 1 "$T/l.err")"; fi

# the held-out split: shards named *val*, else the last 5%
n=$($PY -c "
import sys; sys.path.insert(0, '$T'); import ref
print(len(ref.shard_tokens('$T/nosplit/a.bin')) + len(ref.shard_tokens('$T/nosplit/b.bin')))")
$B eval --model-file "$T/init.safetensors" --data "tokens:$T/nosplit" --heads 4 >/dev/null 2>"$T/e2.err"
w=$(sed -n 's/.* on \([0-9]*\) windows.*/\1/p' "$T/e2.err"); want=$(( (n / 20 - 1) / 64 ))
if [ "$w" = "$want" ]; then ok "held-out split: the last 5% of $n tokens, $w windows"
else bad "held-out split" "$w windows, want $want ($(cat "$T/e2.err"))"; fi

# bad shards: one line naming the file, exit 2
$PY "$T/ref.py" bad "$T/bad"
for f in magic version count wide_count vocab; do
    mkdir -p "$T/b_$f"; cp "$T/bad/$f.bin" "$T/b_$f/x_train.bin"; cp "$VAL" "$T/b_$f/"
    $B solo $SHAPE --data "tokens:$T/b_$f" --steps 1 >"$T/b.out" 2>&1; rc=$?
    if [ $rc = 2 ] && [ "$(wc -l <"$T/b.out")" = 1 ] && grep -q "x_train.bin" "$T/b.out"; then ok "bad shard ($f): $(cat "$T/b.out")"
    else bad "bad shard ($f)" "exit $rc: $(head -c 300 "$T/b.out")"; fi
done
# nanoGPT's headerless files
mkdir -p "$T/nano"
tail -c +1025 "$T/nosplit/a.bin" >"$T/nano/train.bin"; tail -c +1025 "$VAL" >"$T/nano/val.bin"
b3=$(ev "$T/init.safetensors" "nanogpt:$T/nano")
if [ -n "$b3" ] && close "$b3" "$t0"; then ok "nanogpt:DIR reads val.bin: $b3"
else bad "nanogpt:DIR" "'$b3' ($(tail -n 1 "$T/eval.err")), want $t0"; fi
# a shape that is not the file's: one line naming the tensor
$B solo --vocab 512 --ctx 64 --dim 64 --layers 2 --heads 4 --data "tokens:$T/shards" --init "$T/a.llmc" --dim 32 \
    --steps 1 >"$T/s.out" 2>&1; rc=$?
$B solo --vocab 512 --ctx 64 --dim 32 --layers 2 --heads 4 --data "tokens:$T/shards" --init "$T/init.safetensors" \
    --steps 1 >"$T/s2.out" 2>&1; rc2=$?
if [ $rc = 2 ] && [ $rc2 = 2 ] && grep -q channels "$T/s.out" && grep -q "wte.weight" "$T/s2.out" \
   && [ "$(cat "$T/s.out" "$T/s2.out" | wc -l)" = 2 ]; then ok "--init of another shape: $(cat "$T/s2.out")"
else bad "--init of another shape" "exit $rc $rc2: $(cat "$T/s.out" "$T/s2.out")"; fi

# a swarm started from a checkpoint: each node takes its stage from its own copy (the run config's hash),
# and the run computes what solo --init computes
HARNESS=$(dirname "$0")/../harness
. "$(dirname "$0")/hx.inc"
hx init-swarm-vs-solo --stages 2 \
    --creator-args "--vocab 256 --ctx 64 --dim 64 --layers 2 --heads 4 --data text:/usr/share/common-licenses/GPL-3 --steps 8 --seed 5 --codec fp32 --grad-codec fp32 --max-inflight 1" \
    --node-args "--threads 1 --init $T/init256.safetensors" --expect-exit 0 --expect-parity 8
