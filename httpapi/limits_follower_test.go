package httpapi_test

import (
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/perpd/perpd/cluster/clustertest"
)

// TestLimitsOnAFollowerNeitherLeaksNorHangs: GET /v1/limits on a follower
// asks the leader's admin listener for the order and withdraw budgets.
// When that ask fails (the leader just died, its admin port refuses), the
// 503 must not relay the error, which names the leader's admin address
// (an operational surface, never public); and when the leader's admin
// listener accepts but never answers (a partitioned or wedged leader), the
// request must be answered within a bound, not held until the client
// gives up.
func TestLimitsOnAFollowerNeitherLeaksNorHangs(t *testing.T) {
	c := clustertest.Start(t, 3)
	leader := c.Leader()
	f := c.Followers()[0]
	key := signupVia(t, c, f, "limits-follower-1")
	if st, _, body := call(t, c.HTTP(f.ID), "GET", "/v1/limits", key, "", ""); st != 200 {
		t.Fatalf("limits before: %d %s", st, body)
	}
	admin := leader.AdminAddr
	c.Kill(leader.ID)

	// The follower still names the dead leader until its heartbeat
	// timeout: its ask is refused at the old admin port.
	client := &http.Client{Timeout: 20 * time.Second}
	get := func() (int, string, time.Duration) {
		r, _ := http.NewRequest("GET", c.HTTP(f.ID)+"/v1/limits", nil)
		r.Header.Set("x-api-key", key)
		start := time.Now()
		res, err := client.Do(r)
		if err != nil {
			return 0, err.Error(), time.Since(start)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b), time.Since(start)
	}
	_, port, _ := net.SplitHostPort(admin)
	leaks := func(body string) bool {
		return strings.Contains(body, admin) || strings.Contains(body, ":"+port) || strings.Contains(body, "dial tcp") ||
			strings.Contains(body, "internal/meter") || strings.Contains(body, leader.ID)
	}
	st, body, _ := get()
	if st == 503 && leaks(body) {
		t.Errorf("a follower's 503 relays the leader's internal error: %s", body)
	}

	// Now the old admin port accepts and never answers.
	ln, err := net.Listen("tcp", admin)
	if err != nil {
		t.Skipf("cannot take the dead leader's admin port: %v", err)
	}
	var mu sync.Mutex
	var held []net.Conn
	accepted := make(chan struct{}, 16)
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, conn)
			mu.Unlock()
			accepted <- struct{}{}
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, conn := range held {
			_ = conn.Close()
		}
		mu.Unlock()
	})
	st, body, took := get()
	select {
	case <-accepted:
	default:
		t.Skipf("the follower no longer named the dead leader (answered %d %s)", st, body)
	}
	if took > 5*time.Second || st != 503 {
		t.Fatalf("limits while the leader's admin listener never answers: %d after %v: %s", st, took, body)
	}
	if leaks(body) {
		t.Errorf("a follower's 503 relays the leader's internal error: %s", body)
	}
}
