#!/bin/sh
# The kiln command: each subcommand runs and prints what it should; bad usage exits 2.
set -eu
kiln="$1"
fail() { echo "FAIL: $*"; exit 1; }
"$kiln" --version | grep -q '^kiln [0-9]' || fail "--version"
"$kiln" help | grep -q 'usage: kiln' || fail "help"
"$kiln" ops | grep -q '^matmul' || fail "ops table lists matmul"
"$kiln" ops --device meta | grep -q 'meta' || fail "ops --device meta"
"$kiln" ops --json | python3 -c 'import json,sys; d=json.load(sys.stdin); assert any(o["name"]=="add" for o in d["ops"])' 2>/dev/null \
  || "$kiln" ops --json | grep -q '"name": *"add"' || fail "ops --json"
# Each op's signature: in the table beside its first row, and in the JSON as text and lists.
"$kiln" ops | grep -q '^layer_norm .* layer_norm(x, weight?, bias?; inner: i64, eps: f64)$' \
  || fail "ops table prints layer_norm's signature"
"$kiln" ops | grep -q '^cat .* cat(xs...; dim: i64)$' || fail "ops table prints a variadic input"
if command -v python3 >/dev/null 2>&1; then
  "$kiln" ops --json | python3 -c '
import json, sys
ops = {o["name"]: o for o in json.load(sys.stdin)["ops"]}
ln = ops["layer_norm"]
assert ln["signature"] == "layer_norm(x, weight?, bias?; inner: i64, eps: f64)", ln["signature"]
assert [(i["name"], i["optional"]) for i in ln["inputs"]] == [("x", False), ("weight", True), ("bias", True)]
assert [(a["name"], a["type"]) for a in ln["attributes"]] == [("inner", "i64"), ("eps", "f64")]
assert ops["add"]["signature"] == "add(x, y)" and ops["add"]["attributes"] == []
assert all("signature" in o and "inputs" in o and "attributes" in o for o in ops.values())
' || fail "ops --json gives each op's signature"
else
  "$kiln" ops --json | grep -q '"signature": *"layer_norm(x, weight?, bias?; inner: i64, eps: f64)"' \
    || fail "ops --json gives each op's signature"
fi
"$kiln" info | grep -q 'threads:' || fail "info"
# The matmul provider per dtype, as forced; an unknown provider is an error that names it.
KILN_GEMM=ref "$kiln" info | grep -q '^matmul: *f32 ref, f64 ref, bf16 ref, f16 ref' || fail "info prints the provider"
KILN_GEMM=ref "$kiln" info | grep -q '^conv: *f32 im2col, f64 im2col, bf16 im2col, f16 im2col' \
  || fail "info prints the convolution provider"
KILN_GEMM=blis "$kiln" info 2>&1 >/dev/null | grep -q 'KILN_GEMM=blis names no matmul provider' \
  || fail "info reports an unknown KILN_GEMM"
"$kiln" cache stats | grep -q "^entries:" || fail "cache stats"
"$kiln" help | grep -q 'KILN_MODE (strict, debug, fused, compiled)' || fail "help lists every mode"
# Every command answers --help with its usage on stdout and exit 0, and does nothing else.
for cmd in ops info cache demo train; do
  "$kiln" $cmd --help | grep -q "^usage: kiln $cmd" || fail "$cmd --help"
done
"$kiln" ops --help | grep -q -- '--json .*\[default: ' || fail "ops --help gives defaults"
"$kiln" cache --help | grep -q 'stats --json' || fail "cache --help lists stats --json"
"$kiln" demo --help | grep -q 'strict and debug agree' && fail "demo --help ran the demo"
set +e
"$kiln" nosuchcommand >/dev/null 2>&1; [ $? -eq 2 ] || fail "unknown command exits 2"
"$kiln" ops --device nowhere >/dev/null 2>&1; [ $? -eq 2 ] || fail "bad device exits 2"
KILN_MODE=bogus "$kiln" info >/dev/null 2>&1; [ $? -ne 0 ] || fail "bad KILN_MODE is an error"
"$kiln" cache nosuch >/dev/null 2>&1; [ $? -eq 2 ] || fail "unknown cache subcommand exits 2"
"$kiln" demo --nosuch >/dev/null 2>&1; [ $? -eq 2 ] || fail "unknown demo option exits 2"
"$kiln" info --nosuch >/dev/null 2>&1; [ $? -eq 2 ] || fail "unknown info option exits 2"
set -e
echo "cli_smoke: 1 passed, 0 failed"
