#!/usr/bin/awk -f
# fail-summary.awk: the messages of the failed tests in a `go test -v` log,
# without the agent log tails a failed test prints at cleanup. A CI page
# that shows only the end of the output then still shows why.
# Usage: awk -f scripts/fail-summary.awk e2e.log
/^=== (RUN|CONT|NAME|PAUSE) / { test = $3; skip = 0; next }
/^--- FAIL: / { failed[$3] = 1; order[++n] = $3; next }
/^--- (PASS|SKIP): / { next }
/^    [^ ].*\.go:[0-9]+: / {
	# A new message: agent log tails and CPU figures are not the reason.
	skip = ($0 ~ /nomadtest: last [0-9]+ lines of the agent log/ || $0 ~ /agent CPU:/)
	lines = 0
	if (!skip) msg[test] = msg[test] "\n" $0
	next
}
/^        / {
	if (!skip && test != "" && ++lines <= 20) msg[test] = msg[test] "\n" $0
	next
}
END {
	if (n == 0) exit
	print "e2e: the failed tests' own messages:"
	for (i = 1; i <= n; i++) {
		t = order[i]
		print "--- " t ":" (t in msg ? msg[t] : " (no message; see above)")
	}
}
