package cli

import (
	"context"
	"io"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// logBuffer gathers a node's info and debug lines and writes them out
// together, at most logFlushEvery later or once logFlushBytes wait, instead
// of one write call per line: the access log writes a line per order, and
// under load those calls cost the leader a few percent of its CPU. A warn
// or error line goes out at once, after everything before it, so what an
// operator needs after trouble is never held back; a process killed
// outright loses at most logFlushEvery of routine lines.
type logBuffer struct {
	mu  sync.Mutex
	out io.Writer
	buf []byte
}

const (
	logFlushEvery = 100 * time.Millisecond
	logFlushBytes = 64 << 10
)

func newLogBuffer(out io.Writer) *logBuffer {
	return &logBuffer{out: out, buf: make([]byte, 0, logFlushBytes)}
}

// Write buffers p as a routine line.
func (b *logBuffer) Write(p []byte) (int, error) { return b.LevelWrite(hclog.Info, p) }

// LevelWrite is how hclog hands over each line with its level
// (hclog.LevelWriter).
func (b *logBuffer) LevelWrite(level hclog.Level, p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if level >= hclog.Warn || len(b.buf) >= logFlushBytes {
		if err := b.flushLocked(); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// Flush writes out whatever is buffered.
func (b *logBuffer) Flush() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.flushLocked()
}

func (b *logBuffer) flushLocked() error {
	if len(b.buf) == 0 {
		return nil
	}
	_, err := b.out.Write(b.buf)
	b.buf = b.buf[:0]
	return err
}

// run flushes every logFlushEvery until ctx ends, then once more.
func (b *logBuffer) run(ctx context.Context) {
	t := time.NewTicker(logFlushEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			_ = b.Flush()
			return
		case <-t.C:
			_ = b.Flush()
		}
	}
}
