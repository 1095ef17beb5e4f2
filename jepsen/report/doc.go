// Package report writes a run's report folder (jepsen/reports/<timestamp>/:
// the history, the checkers' results, the final state, porcupine's HTML,
// node logs) and the one-line summary that ends a run.
//
// It only formats and writes what it is given; it must never decide a
// verdict beyond combining the checkers' own.
package report
