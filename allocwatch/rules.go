package allocwatch

import (
	"math/rand/v2"
	"time"
)

const (
	// backoffStart is the wait after the first failure; it doubles per
	// further failure up to backoffCap.
	backoffStart = time.Second
	backoffCap   = time.Minute
	// backoffJitter is the fraction taken off at random, so many plugins
	// do not retry in step after a leader election.
	backoffJitter = 0.2
)

// backoff is the wait before retry number attempt (1 for the first retry
// after a failure): 1s, 2s, 4s ... capped at 1m, each less up to 20% at
// random. Callers reset attempt to 0 after any success.
func backoff(attempt int) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	d := backoffCap
	if attempt <= 7 { // 1s<<6 = 64s is past the cap
		d = min(backoffStart<<(attempt-1), backoffCap)
	}
	return d - time.Duration(rand.Float64()*backoffJitter*float64(d))
}

// nextWaitIndex applies consul-template's blocking-query rules to an answer
// with index lastIndex to a query that waited on waitIndex:
//
//   - lastIndex > waitIndex: something changed; wait on lastIndex next.
//   - lastIndex == waitIndex: the wait timed out; re-block on the same index.
//   - lastIndex < waitIndex: the index went backwards (allocations GC'd,
//     a snapshot restore, a rebuilt cluster); start over with 0, a
//     non-blocking query, rather than block on an index that may not come.
//
// A failed query starts over with 0 too (waitIndexAfterFailure).
//
// The index only steers the next query. Whether an answer is delivered is
// decided by its content (shouldDeliver): every answer is a full snapshot.
func nextWaitIndex(waitIndex, lastIndex uint64) (next uint64, timedOut bool) {
	switch {
	case lastIndex < waitIndex:
		return 0, false
	case lastIndex == waitIndex:
		return waitIndex, true
	default:
		return lastIndex, false
	}
}

// waitIndexAfterFailure is what the query after a failed one waits on: 0,
// a non-blocking query. What changed while the servers did not answer is
// unknown, and a deletion (`job stop -purge`, a GC) does not raise the
// node's index (Nomad answers the highest ModifyIndex of the allocations
// left): blocked on the old index, the watcher would miss an allocation
// stopped and purged during the outage until its wait ran out, and the
// slot would stay held for that long (the simulation's seed 5170958).
const waitIndexAfterFailure = 0

// shouldDeliver decides whether Run hands an answer to its callback: the
// first answer always, then any answer whose content differs from the last
// delivered one, and an unchanged one once sinceLast reaches resync.
func shouldDeliver(deliveredBefore, changed bool, sinceLast, resync time.Duration) bool {
	return !deliveredBefore || changed || sinceLast >= resync
}

// blockingWait is the wait time of the next blocking query: WaitTime, but
// short enough that an idle node still gets its resync delivery on time,
// and never below floor (a zero wait would mean Nomad's 5m default).
func blockingWait(waitTime, untilResync, floor time.Duration) time.Duration {
	return max(min(waitTime, untilResync), floor)
}
