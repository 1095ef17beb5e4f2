package httpapi

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/fsm/wire"
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
	if n := testing.AllocsPerRun(100, func() { _ = keyHashHex(key) }); !raceEnabled && n != 0 {
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
	if n := testing.AllocsPerRun(100, func() { _ = randomID(16) }); !raceEnabled && n != 1 {
		t.Errorf("randomID(16) allocates %v times, want 1 (its string)", n)
	}
}

// requestHash is the hash fsm.RequestHash makes of the method, the path
// and encoding/json's form of the request, whatever the request and
// however long its parts (the stack buffer overflows to the heap).
func TestRequestHashIsFSMs(t *testing.T) {
	ip := func(v int64) *wire.Int { w := wire.Int(v); return &w }
	plain := OrderRequest{MarketID: "BTC-PERP", Side: "buy", Type: "market", Contracts: 1, Leverage: ip(10)}
	trig := plain
	trig.Trigger = &OrderTrigger{Kind: "stop", Level: 9_000_000_000_000}
	quoted := plain
	quoted.MarketID = `BTC"<PERP>` // not written verbatim by JSON: encoding/json's form
	label := strings.Repeat("x", 600)
	for _, tc := range []struct {
		method, path string
		req          any
	}{
		{"POST", "/v1/orders", &plain}, {"POST", "/v1/orders", plain}, {"POST", "/v1/orders", &trig},
		{"POST", "/v1/orders", &quoted}, {"POST", "/v1/signup", Empty{}},
		{"POST", "/v1/sessions", MintRequest{Label: &label}}, {"DELETE", "/v1/orders/" + strings.Repeat("o", 700), Empty{}},
	} {
		canon, err := json.Marshal(tc.req)
		if err != nil {
			t.Fatal(err)
		}
		want := fsm.RequestHash([]byte(tc.method), []byte(tc.path), canon)
		got, err := requestHash(tc.method, tc.path, tc.req)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s %s %T: %x, %v; fsm.RequestHash %x", tc.method, tc.path, tc.req, got, err, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = requestHash("POST", "/v1/orders", &plain) }); !raceEnabled && n != 1 {
		t.Errorf("an order's request hash allocates %v times, want 1 (the hash)", n)
	}
}
