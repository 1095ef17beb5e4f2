//go:build jepsen_bug

package node

// A planted bug for the Jepsen harness's self-test (jepsen/README.md):
// built with -tags jepsen_bug, linearizable reads skip the read index and
// answer from whatever this node has applied, so a lagging or partitioned
// follower serves stale balances. The harness must flag the history as not
// linearizable. Never built into a release.
func init() { bugSkipReadIndex = true }
