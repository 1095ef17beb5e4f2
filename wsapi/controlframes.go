package wsapi

import (
	"bufio"
	"encoding/binary"
	"errors"
	"net"
	"net/http"

	"golang.org/x/time/rate"
)

// Protocol-level control frames (ping, pong) never reach melody's handlers:
// the WebSocket library answers each ping with a pong itself. A client
// could send 6-byte pings as fast as its link allows and have the node
// write a pong for each, outside every budget. So the hub reads the
// connection's bytes through frameMeter, which follows the frame headers
// of the client's stream and draws the connection's raw frame budget
// (RawFramesPerSecond, RawFrameBurst) for every ping and pong; past it the
// connection's next read fails and the connection is closed, counted as a
// flood close. Text and binary frames draw the same bucket in onMessage.

// errControlFlood ends a connection past its raw budget on control frames.
var errControlFlood = errors.New("websocket: too many control frames")

// Opcodes of the frames frameMeter meters (RFC 6455 section 5.2).
const (
	opPing = 0x9
	opPong = 0xA
)

// meteredWriter hands the WebSocket upgrade a connection whose reads go
// through a frameMeter drawing raw.
type meteredWriter struct {
	http.ResponseWriter
	raw *rate.Limiter
}

func (w meteredWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("websocket: the response cannot be hijacked")
	}
	c, brw, err := h.Hijack()
	if err != nil || brw.Reader.Buffered() > 0 {
		// Bytes before the handshake finished: the upgrade refuses them,
		// so nothing is read through the meter.
		return c, brw, err
	}
	mc := &meteredConn{Conn: c, raw: w.raw}
	return mc, bufio.NewReadWriter(bufio.NewReader(mc), brw.Writer), nil
}

// meteredConn is a client connection read through a frameMeter.
type meteredConn struct {
	net.Conn
	raw   *rate.Limiter
	frame frameMeter
}

func (c *meteredConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if !c.frame.scan(p[:n], c.allow) {
		return 0, errControlFlood
	}
	return n, err
}

func (c *meteredConn) allow(opcode byte) bool {
	return (opcode != opPing && opcode != opPong) || c.raw.Allow()
}

// frameMeter follows the frame headers of a client's byte stream (client
// frames are masked: 2 bytes, 0, 2 or 8 of extended length, 4 of mask,
// then the payload) and calls a check for each header it completes.
type frameMeter struct {
	hdr  [14]byte
	have int    // header bytes gathered
	skip uint64 // payload bytes of the current frame still to pass
}

// scan reads b; it reports false as soon as check refuses a frame.
func (f *frameMeter) scan(b []byte, check func(opcode byte) bool) bool {
	for len(b) > 0 {
		if f.skip > 0 {
			k := min(f.skip, uint64(len(b)))
			b, f.skip = b[k:], f.skip-k
			continue
		}
		f.hdr[f.have] = b[0]
		f.have++
		b = b[1:]
		if f.have < 2 {
			continue
		}
		need := 2
		switch f.hdr[1] & 0x7f {
		case 126:
			need += 2
		case 127:
			need += 8
		}
		if f.hdr[1]&0x80 != 0 {
			need += 4
		}
		if f.have < need {
			continue
		}
		switch l := f.hdr[1] & 0x7f; l {
		case 126:
			f.skip = uint64(binary.BigEndian.Uint16(f.hdr[2:4]))
		case 127:
			f.skip = binary.BigEndian.Uint64(f.hdr[2:10])
		default:
			f.skip = uint64(l)
		}
		f.have = 0
		if !check(f.hdr[0] & 0x0f) {
			return false
		}
	}
	return true
}
