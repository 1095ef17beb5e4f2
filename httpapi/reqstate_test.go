package httpapi

import (
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"reflect"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/perpd/perpd/fsm"
)

// setHeader writes into the header map directly, so every key it is given
// must be the canonical one Header.Get and the wire use.
func TestSlotHeaderKeysAreCanonical(t *testing.T) {
	for _, key := range []string{RequestIDHeader, hdrRaftIndex, hdrRateLimit, hdrRateRemaining, hdrRateReset,
		"Idempotent-Replayed", "Content-Type", "Content-Length"} {
		if canon := textproto.CanonicalMIMEHeaderKey(key); canon != key {
			t.Errorf("%q is not canonical (%q)", key, canon)
		}
	}
}

// A header set into a slot behaves as Header.Set: Get reads it, setting
// it again replaces it, and an Add appends to a copy, never into the next
// slot.
func TestSlotHeadersBehaveAsHeaderSet(t *testing.T) {
	w := httptest.NewRecorder()
	c, _ := gin.CreateTestContext(w)
	st := stateOf(c)
	st.setHeader(c, slotRaftIndex, hdrRaftIndex, "7")
	st.setHeader(c, slotRateLimit, hdrRateLimit, "60")
	st.setHeader(c, slotRaftIndex, hdrRaftIndex, "9")
	h := c.Writer.Header()
	h.Add(hdrRaftIndex, "10")
	if got := h.Values(hdrRaftIndex); !reflect.DeepEqual(got, []string{"9", "10"}) {
		t.Fatalf("X-Raft-Index %q", got)
	}
	if got := h.Values(hdrRateLimit); !reflect.DeepEqual(got, []string{"60"}) {
		t.Fatalf("an Add reached the next slot: X-Ratelimit-Limit %q", got)
	}
}

// respond writes what gin's c.Data wrote before it: status, header map and
// body, whatever the status and whether a content type was set already.
func TestRespondWritesWhatGinDataWrites(t *testing.T) {
	for _, status := range []int{200, 201, 204, 304, 400, 404, 409, 429, 503} {
		for _, body := range []string{"", `{"orderId":"o1","status":"filled"}`} {
			for _, preset := range []string{"", "text/plain"} {
				run := func(answer func(*gin.Context)) *httptest.ResponseRecorder {
					w := httptest.NewRecorder()
					c, _ := gin.CreateTestContext(w)
					c.Request = httptest.NewRequest(http.MethodPost, "/v1/orders", nil)
					c.Writer.Header().Set("X-Request-Id", "r1")
					if preset != "" {
						c.Writer.Header().Set("Content-Type", preset)
					}
					answer(c)
					c.Writer.WriteHeaderNow()
					return w
				}
				res := &fsm.Result{Status: status, Body: []byte(body)}
				got := run(func(c *gin.Context) { respond(c, res) })
				want := run(func(c *gin.Context) { c.Data(res.Status, "application/json; charset=utf-8", res.Body) })
				if got.Code != want.Code || !reflect.DeepEqual(got.Result().Header, want.Result().Header) || got.Body.String() != want.Body.String() {
					t.Errorf("status %d, body %q, content type %q: respond wrote %d %v %q, c.Data %d %v %q", status, body, preset,
						got.Code, got.Result().Header, got.Body, want.Code, want.Result().Header, want.Body)
				}
			}
		}
	}
}

// The key and idempotency headers are looked up by their canonical names,
// which must be what Header.Get makes of the documented spellings.
func TestLookupHeaderKeysAreCanonical(t *testing.T) {
	for spelled, key := range map[string]string{KeyHeader: keyHeaderKey, IdemHeader: idemHeaderKey} {
		if canon := textproto.CanonicalMIMEHeaderKey(spelled); canon != key {
			t.Errorf("%s is looked up as %q; Header.Get looks for %q", spelled, key, canon)
		}
	}
}
