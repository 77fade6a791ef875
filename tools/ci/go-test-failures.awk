# What each failed Go test printed, from the output of `go test -v`, repeated after the run.
#
# Why: a failing suite stops `make test` at once, and where only the end of the log is shown (a
# CI summary) the failure's own lines, printed where the test ran, minutes of output earlier,
# are not there; only the names are. This prints, for each `--- FAIL:` of the log, the lines
# the test (or subtest) printed, under its name.
#
#   awk -f tools/ci/go-test-failures.awk LOG
#
# Lines are attributed to the test `go test -v` last named (`=== RUN`, `=== CONT`, `=== NAME`).
# What comes after a test's result and before its package's `FAIL` line (a panic's trace, a
# build error) is printed under that `FAIL` line.
/^=== (RUN|CONT|NAME|PAUSE) / { current = $3; next }
/^[ \t]*--- FAIL: / {
  failed++
  printf "--- FAIL: %s %s\n%s", $3, $4, lines[$3]
  lines[$3] = ""
  next
}
/^[ \t]*--- (PASS|SKIP): / { lines[$3] = ""; next }
/^(FAIL|ok)[ \t]/ {
  if ($1 == "FAIL" && lines[current] != "") { failed++; printf "%s\n%s", $0, lines[current] }
  current = ""
  delete lines
  next
}
/^(PASS|FAIL)$/ { next }
{ lines[current] = lines[current] $0 "\n" }
END {
  if (failed == 0) print "(no `--- FAIL:` line in the log: see the end of the output above)"
}
