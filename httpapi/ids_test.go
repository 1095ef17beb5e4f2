package httpapi

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// HashKey is the hex SHA-256 the log stores, for keys of every length
// (keyHashHex hashes from a stack copy up to 128 bytes, from the heap
// beyond), and the auth path's lookup form is the same text.
func TestHashKeyIsHexSHA256(t *testing.T) {
	for _, key := range []string{"", "pdk_" + strings.Repeat("ab", 24), strings.Repeat("k", 127), strings.Repeat("k", 128),
		strings.Repeat("k", 129), strings.Repeat("é", 300)} {
		sum := sha256.Sum256([]byte(key))
		want := hex.EncodeToString(sum[:])
		if got := HashKey(key); got != want {
			t.Errorf("HashKey of %d bytes: %s, want %s", len(key), got, want)
		}
		if h := keyHashHex(key); string(h[:]) != want {
			t.Errorf("keyHashHex of %d bytes: %s, want %s", len(key), h, want)
		}
	}
	key := "pdk_" + strings.Repeat("0f", 24)
	if n := testing.AllocsPerRun(100, func() { _ = keyHashHex(key) }); n != 0 {
		t.Errorf("keyHashHex allocates %v times", n)
	}
}

// randomID draws n bytes and writes them as lower-case hex, one string
// per call, fresh every time.
func TestRandomIDIsFreshHex(t *testing.T) {
	for _, n := range []int{8, 12, 16, 24, 32, 33, 64} {
		seen := map[string]bool{}
		shape := regexp.MustCompile(`^[0-9a-f]{` + strconv.Itoa(2*n) + `}$`)
		for range 20 {
			id := randomID(n)
			if !shape.MatchString(id) {
				t.Fatalf("randomID(%d) = %q", n, id)
			}
			if seen[id] {
				t.Fatalf("randomID(%d) repeated %q", n, id)
			}
			seen[id] = true
		}
	}
	if n := testing.AllocsPerRun(100, func() { _ = randomID(16) }); n != 1 {
		t.Errorf("randomID(16) allocates %v times, want 1 (its string)", n)
	}
}
