// Command jepsen runs the perpd fault-injection test (package harness) and
// prints its one-line summary. It exits 0 when every checker passed, 1 on a
// violation and 2 when the run could not be carried out. See
// jepsen/README.md.
package main
