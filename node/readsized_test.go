package node

import (
	"bytes"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
)

// readSized sizes its buffer from the metadata, but what it returns is
// what the reader held, whatever size the metadata claims.
func TestReadSizedReadsAllWhateverTheMetadataSays(t *testing.T) {
	body := strings.Repeat("perpd-snapshot ", 10_000)
	for _, meta := range []*raft.SnapshotMeta{nil, {Size: 0}, {Size: 1}, {Size: int64(len(body))}, {Size: int64(len(body)) * 3}, {Size: 1 << 40}} {
		got, err := readSized(strings.NewReader(body), meta)
		if err != nil || !bytes.Equal(got, []byte(body)) {
			t.Fatalf("meta %+v: read %d bytes, %v; want %d", meta, len(got), err, len(body))
		}
	}
}
