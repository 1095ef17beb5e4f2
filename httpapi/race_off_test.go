//go:build !race

package httpapi

// raceEnabled: the race detector changes what allocates, so allocation
// counts are not asserted under it.
const raceEnabled = false
