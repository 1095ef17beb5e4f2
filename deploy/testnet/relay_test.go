package main

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"
)

// tcpPair returns both ends of a loopback TCP connection.
func tcpPair(t *testing.T) (*net.TCPConn, *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() { c, _ := ln.Accept(); accepted <- c }()
	a, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b := <-accepted
	t.Cleanup(func() { a.Close(); b.Close() })
	return a.(*net.TCPConn), b.(*net.TCPConn)
}

// TestDelayedCopyHoldsEveryChunkAndKeepsOrder: what goes in comes out
// whole and in order, none of it before the delay minus the jitter.
func TestDelayedCopyHoldsEveryChunkAndKeepsOrder(t *testing.T) {
	srcW, srcR := tcpPair(t)
	dstW, dstR := tcpPair(t)
	const delay, jitter = 40 * time.Millisecond, 10 * time.Millisecond
	go delayedCopy(dstW, srcR, delay, jitter)
	var sent bytes.Buffer
	start := time.Now()
	for i := range 50 {
		chunk := bytes.Repeat([]byte{byte(i)}, 100+i)
		sent.Write(chunk)
		if _, err := srcW.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	_ = srcW.CloseWrite()
	first := make([]byte, 1)
	if _, err := io.ReadFull(dstR, first); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < delay-jitter {
		t.Fatalf("the first byte arrived after %v, before the delay", took)
	}
	rest, err := io.ReadAll(dstR) // ends at the relayed half-close
	if err != nil {
		t.Fatal(err)
	}
	if got := append(first, rest...); !bytes.Equal(got, sent.Bytes()) {
		t.Fatalf("relayed %d bytes, not the %d sent in order", len(got), sent.Len())
	}
}
