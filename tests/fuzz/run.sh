#!/bin/sh
# Runs each libFuzzer target of a KILN_FUZZ build for SECONDS (`make fuzz`; docs/fuzzing.md).
# Usage: sh tests/fuzz/run.sh BUILD_DIR SECONDS [TARGET...]
# (default: every target, one per directory of tests/fuzz/corpus/)
# Seeds come from tests/fuzz/corpus/<target>/ (read only); new inputs go to
# BUILD_DIR/fuzz/corpus/<target>/, kept between runs; crashes, hangs, leaks and inputs that take
# too much memory go to BUILD_DIR/fuzz/artifacts/<target>/ and are listed at the end, with the
# command that replays each. FUZZ_FLAGS adds libFuzzer flags (e.g. -fork=1 -ignore_crashes=1).
# Exit status 1 when any target found anything.
set -u
BUILD=$(cd "$1" && pwd)
SECONDS_EACH=$2
shift 2
HERE=$(cd "$(dirname "$0")" && pwd)
TARGETS=${*:-$(ls "$HERE/corpus")}
WORK=$BUILD/fuzz
# Fuzzing writes inputs to temporary files and never needs generated kernels; keep both here.
export TMPDIR="$WORK/tmp" KILN_CACHE_DIR="$WORK/cache"
mkdir -p "$TMPDIR" "$KILN_CACHE_DIR"

found=0
for t in $TARGETS; do
    bin=$BUILD/fuzz_$t
    [ -x "$bin" ] || { echo "fuzz: $bin is not built (cmake --build $BUILD --target fuzz_targets)"; exit 2; }
    mkdir -p "$WORK/corpus/$t" "$WORK/artifacts/$t"
    echo "fuzz: $t for ${SECONDS_EACH}s"
    touch "$WORK/$t.start"
    # -timeout: an input running 20 s is a hang (inputs take milliseconds; a loaded machine can
    # stall one for seconds); -malloc_limit_mb: one allocation of 512 MB for an input of a few
    # kilobytes is a bug (issue 11); -rss_limit_mb: libFuzzer's default.
    # shellcheck disable=SC2086 # FUZZ_FLAGS is a list of flags
    "$bin" -max_total_time="$SECONDS_EACH" -timeout=20 -rss_limit_mb=2048 -malloc_limit_mb=512 \
        -dict="$HERE/kiln.dict" -artifact_prefix="$WORK/artifacts/$t/" -print_final_stats=1 ${FUZZ_FLAGS:-} \
        "$WORK/corpus/$t" "$HERE/corpus/$t" >"$WORK/$t.log" 2>&1
    status=$?
    grep -E '^(stat::number_of_executed_units|stat::new_units_added|Done)' "$WORK/$t.log" | tr '\n' ' '
    echo
    artifacts=$(find "$WORK/artifacts/$t" -type f -newer "$WORK/$t.start")
    if [ "$status" -ne 0 ] || [ -n "$artifacts" ]; then
        found=1
        echo "fuzz: $t FAILED (exit $status); from $WORK/$t.log:"
        grep -E 'ERROR: |SUMMARY: |contract broken' "$WORK/$t.log" | sort | uniq -c | head -20
        for a in $artifacts; do echo "  input: $a   (replay: $bin $a)"; done
    fi
done
exit $found
