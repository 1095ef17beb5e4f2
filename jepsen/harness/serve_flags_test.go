package harness

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// A help text that lists no flags (the command failed or timed out under
// load) is asked again, and in the end is an error: it used to read as a
// build without --clock-offset, which turned the clock nemesis and the
// funding boundary off with only a warning.
func TestServeFlagsRetriesAndRefusesAnEmptyHelp(t *testing.T) {
	ctx := context.Background()
	calls := 0
	flaky := func(context.Context) ([]byte, error) {
		calls++
		if calls == 1 {
			return nil, errors.New("signal: killed")
		}
		return []byte("Flags:\n      --data string\n      --clock-offset duration\n"), nil
	}
	flags, err := readServeFlags(ctx, flaky)
	if err != nil || !strings.Contains(flags, "--clock-offset") || calls != 2 {
		t.Fatalf("after one failed try: flags %q, err %v, %d calls; want the second answer", flags, err, calls)
	}
	calls = 0
	broken := func(context.Context) ([]byte, error) {
		calls++
		return []byte("exec format error"), errors.New("exit status 1")
	}
	if flags, err := readServeFlags(ctx, broken); err == nil || flags != "" || calls != 3 {
		t.Fatalf("a help that never lists flags: flags %q, err %v, %d calls; want an error after 3", flags, err, calls)
	}
}
