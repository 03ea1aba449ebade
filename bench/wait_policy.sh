#!/bin/sh
# Does a program linking libkiln need OMP_WAIT_POLICY=passive? bench_lm (stories15M shape, f32,
# strict; it links libkiln.a) with the variable unset and set, for each build given (e.g. this
# one and a checkout from before issue 11), alternated over ROUNDS rounds, on a quiet machine
# and again with one core kept busy by another process. Prints tok/s lines for each run.
#
#   sh bench/wait_policy.sh build [/path/to/other/build ...]      # ROUNDS=3 by default
set -u
ROUNDS=${ROUNDS:-3}
echo "uptime: $(uptime)"
run() { # label build env...
    label=$1 build=$2; shift 2
    line=$(env -u OMP_WAIT_POLICY -u KMP_BLOCKTIME "$@" "$build/bench_lm" --dtypes f32 --modes strict --reps 3 2>&1 |
           grep -E '^kiln +lm_' | awk '{print $2, $(NF-1)}' | tr '\n' ' ')
    echo "$label $build: $line"
}
for load in quiet busy; do
    busy_pid=
    if [ "$load" = busy ]; then sh -c 'while :; do :; done' & busy_pid=$!; fi
    r=1
    while [ "$r" -le "$ROUNDS" ]; do
        for b in "$@"; do
            run "[$load round $r] unset  " "$b"
            run "[$load round $r] passive" "$b" OMP_WAIT_POLICY=passive
        done
        r=$((r + 1))
    done
    [ -n "$busy_pid" ] && kill "$busy_pid"
done
