# shellcheck shell=bash
# Sourced by the CLI checks that allow a run a number of seconds (kill_rank.sh, hung_rank.sh,
# bad_input.sh): a calibration taken in the same run, so that a busy host widens their
# windows instead of failing them (docs/testing.md#timing-sensitive-checks).
#
#   slowdown        prints how many times longer than its own CPU time a fixed single-threaded
#                   loop (about 0.2 CPU-seconds) takes right now: wall / (user + sys), at least
#                   1, at most SLOWDOWN_MAX (10), 1 decimal. About 1 on a host with a core to
#                   spare, 2 when every thread gets half a core, more when the run queue is long.
#                   SLOWDOWN=F in the environment skips the measurement and prints F.
#   scaled S F      S seconds times F, rounded up to whole seconds.

slowdown() {
  if [ -n "${SLOWDOWN:-}" ]; then
    echo "$SLOWDOWN"
    return 0
  fi
  local t TIMEFORMAT='%R %U %S'
  t=$({ time awk 'BEGIN { for (i = 0; i < 2000000; i++) s += i % 7 }' >/dev/null; } 2>&1 | tail -n 1)
  awk -v t="$t" -v max="${SLOWDOWN_MAX:-10}" 'BEGIN {
    split(t, a, " "); cpu = a[2] + a[3]; f = (cpu > 0.02) ? a[1] / cpu : 1
    if (f < 1) f = 1
    if (f > max) f = max
    printf "%.1f\n", f }'
}

scaled() {
  awk -v s="$1" -v f="$2" 'BEGIN { v = s * f; r = int(v); if (r < v) r++; print r }'
}
