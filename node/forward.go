package node

import (
	"bytes"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/perpd/perpd/fsm"
)

// ForwardPath is where the leader accepts writes forwarded by followers, on
// the admin listener.
const ForwardPath = "/internal/propose"

// maxForwardBytes bounds a forwarded command (the public body limit is far
// below it).
const maxForwardBytes = 8 << 20

// forwarder sends a command to the leader's admin listener.
type forwarder struct {
	token  string
	client *http.Client
}

func newForwarder(token string) *forwarder {
	return &forwarder{token: token, client: &http.Client{
		Transport: &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second},
	}}
}

func (f *forwarder) propose(ctx context.Context, adminAddr string, cmd *fsm.Command) (*fsm.Result, error) {
	body, err := fsm.Marshal(cmd)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+adminAddr+ForwardPath, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+f.token)
	req.Header.Set("Content-Type", "application/cbor")
	resp, err := f.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxForwardBytes))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("leader answered %d: %s", resp.StatusCode, strings.TrimSpace(string(b)))
	}
	var res fsm.Result
	if err := fsm.Unmarshal(b, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// CheckToken compares a bearer token with the cluster's in constant time.
func CheckToken(r *http.Request, token string) bool {
	got := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	return token != "" && subtle.ConstantTimeCompare([]byte(got), []byte(token)) == 1
}

// internalPost guards a node-to-node endpoint: POST with the cluster token.
func (n *Node) internalPost(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if !CheckToken(r, n.cfg.AdminToken) {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h(w, r)
	})
}

// ForwardHandler serves ForwardPath: it applies a follower's command if this
// node leads, and answers 421 otherwise so the follower looks again.
func (n *Node) ForwardHandler() http.Handler {
	return n.internalPost(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(io.LimitReader(r.Body, maxForwardBytes))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		cmd, err := fsm.DecodeCommand(b)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), n.cfg.ProposeTimeout)
		defer cancel()
		res, err := n.applyLocal(ctx, cmd)
		if err != nil {
			status := http.StatusServiceUnavailable
			if errors.Is(err, errNotLeader) {
				status = http.StatusMisdirectedRequest
			}
			http.Error(w, err.Error(), status)
			return
		}
		out, err := fsm.Marshal(res)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/cbor")
		_, _ = w.Write(out)
	})
}
