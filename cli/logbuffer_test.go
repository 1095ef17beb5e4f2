package cli

import (
	"context"
	"strings"
	"testing"
	"time"
)

// Routine lines wait for the flusher; a warning goes out at once with
// everything logged before it, in order; the flusher's last flush leaves
// nothing behind.
func TestLogBufferHoldsRoutineLinesButNotWarnings(t *testing.T) {
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			var out lockedBuffer
			buf := newLogBuffer(&out)
			log := (&opsFlags{logFormat: format}).logger("debug", "node1", buf)

			log.Info("first routine line")
			log.Debug("second routine line")
			if s := out.String(); s != "" {
				t.Fatalf("routine lines were written at once: %q", s)
			}
			log.Warn("trouble")
			s := out.String()
			i1, i2, iw := strings.Index(s, "first routine"), strings.Index(s, "second routine"), strings.Index(s, "trouble")
			if i1 < 0 || i2 < i1 || iw < i2 {
				t.Fatalf("a warning must flush the lines before it, in order: %q", s)
			}

			log.Info("after the warning")
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { buf.run(ctx); close(done) }()
			deadline := time.Now().Add(5 * time.Second)
			for !strings.Contains(out.String(), "after the warning") {
				if time.Now().After(deadline) {
					t.Fatal("the flusher never wrote the buffered line")
				}
				time.Sleep(10 * time.Millisecond)
			}
			log.Info("last line")
			cancel()
			<-done
			if !strings.Contains(out.String(), "last line") {
				t.Fatal("the final flush left a line behind")
			}
		})
	}
}

// A burst larger than the buffer is written out without waiting.
func TestLogBufferWritesAFullBuffer(t *testing.T) {
	var out lockedBuffer
	buf := newLogBuffer(&out)
	line := strings.Repeat("x", 1000) + "\n"
	for range logFlushBytes/len(line) + 1 {
		if _, err := buf.Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	if len(out.String()) < logFlushBytes {
		t.Fatalf("a full buffer was held: %d bytes written", len(out.String()))
	}
}
