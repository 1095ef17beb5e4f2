package cluster

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/node"
)

// AdminClient calls one node's admin listener.
type AdminClient struct {
	Addr  string
	Token string
	HTTP  *http.Client

	scheme string // "http" unless UseTLS
}

// NewAdminClient returns a client for the admin listener at addr.
func NewAdminClient(addr, token string) *AdminClient {
	return &AdminClient{Addr: addr, Token: token, HTTP: &http.Client{Timeout: 30 * time.Second}}
}

// UseTLS makes c speak HTTPS with cfg (node.PeerTLS.ClientConfig: an
// operator or node certificate, the cluster CA). A nil cfg is plain HTTP.
func (c *AdminClient) UseTLS(cfg *tls.Config) *AdminClient {
	if cfg == nil {
		return c
	}
	c.scheme = "https"
	c.HTTP.Transport = &http.Transport{TLSClientConfig: cfg, IdleConnTimeout: 30 * time.Second}
	return c
}

// plainRefused refuses plain HTTP to an address off this machine, where
// the bearer token would cross the network in clear: a node without TLS
// serves its admin listener on loopback only (node.RequireLoopback), so
// such an address is a TLS listener or a wrong one.
func (c *AdminClient) plainRefused() error {
	if c.scheme != "" {
		return nil
	}
	if node.RequireLoopback("admin address", c.Addr) != nil {
		return fmt.Errorf("refusing to send the admin token in clear to %s, which is not a loopback address: "+
			"pass the operator's --tls-cert, --tls-key and --tls-ca", c.Addr)
	}
	return nil
}

func (c *AdminClient) url(path string) string {
	if c.scheme == "" {
		return "http://" + c.Addr + path
	}
	return c.scheme + "://" + c.Addr + path
}

// Do sends a JSON request and decodes a JSON answer into out (may be nil).
// A non-2xx answer becomes an error carrying the server's message.
func (c *AdminClient) Do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	if err := c.plainRefused(); err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, method, c.url(path), body)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode == http.StatusBadRequest && c.scheme == "" && bytes.Contains(b, []byte("HTTPS server")) {
		return fmt.Errorf("%s %s: the admin listener runs TLS: pass the operator's --tls-cert, --tls-key and --tls-ca", method, path)
	}
	if resp.StatusCode/100 != 2 {
		return refusal(method, path, resp.StatusCode, b)
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// Status fetches the node's status.
func (c *AdminClient) Status(ctx context.Context) (*node.Status, error) {
	var st node.Status
	return &st, c.Do(ctx, http.MethodGet, "/admin/status", nil, &st)
}

// State fetches applied index and state hash.
func (c *AdminClient) State(ctx context.Context) (*StateView, error) {
	var st StateView
	return &st, c.Do(ctx, http.MethodGet, "/admin/state", nil, &st)
}

// Replicas compares every member's state hash at one index.
func (c *AdminClient) Replicas(ctx context.Context) (*ReplicasView, error) {
	var v ReplicasView
	return &v, c.Do(ctx, http.MethodGet, "/admin/replicas", nil, &v)
}

// Join adds a voter (relayed to the leader by any member). replace
// allows moving an existing member to raftAddr (JoinRequest.Replace).
func (c *AdminClient) Join(ctx context.Context, id, raftAddr string, replace bool) (json.RawMessage, error) {
	return c.JoinWith(ctx, JoinRequest{ID: id, Raft: raftAddr, Replace: replace})
}

// JoinWith sends a join request as given (Replace, Force).
func (c *AdminClient) JoinWith(ctx context.Context, req JoinRequest) (json.RawMessage, error) {
	var out json.RawMessage
	return out, c.Do(ctx, http.MethodPost, "/admin/join", req, &out)
}

// Remove removes a member.
func (c *AdminClient) Remove(ctx context.Context, id string) (json.RawMessage, error) {
	return c.RemoveWith(ctx, RemoveRequest{ID: id})
}

// RemoveWith sends a remove request as given (Force).
func (c *AdminClient) RemoveWith(ctx context.Context, req RemoveRequest) (json.RawMessage, error) {
	var out json.RawMessage
	return out, c.Do(ctx, http.MethodPost, "/admin/remove", req, &out)
}

// TransferLeadership hands leadership to `to` (any when empty).
func (c *AdminClient) TransferLeadership(ctx context.Context, to string) (*node.Status, error) {
	var st node.Status
	return &st, c.Do(ctx, http.MethodPost, "/admin/transfer-leadership", TransferRequest{To: to}, &st)
}

// Snapshot downloads a consistent snapshot, writing the backup format
// (metadata line, then the raw snapshot) to w. progress, when set, is
// called with bytes done and total.
func (c *AdminClient) Snapshot(ctx context.Context, w io.Writer, progress func(done, total int64)) (*raft.SnapshotMeta, error) {
	if err := c.plainRefused(); err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url("/admin/snapshot"), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	// The download is not bounded (it may take long); the wait for the
	// node to answer, once it has taken the snapshot, is: by c.HTTP.Timeout
	// (admin --timeout), so that a node that never answers does not hold
	// the command forever.
	cl := *c.HTTP
	cl.Timeout = 0
	var answered *time.Timer
	if c.HTTP.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		req = req.WithContext(ctx)
		answered = time.AfterFunc(c.HTTP.Timeout, cancel)
	}
	resp, err := cl.Do(req)
	if answered != nil && !answered.Stop() {
		if err == nil {
			resp.Body.Close()
		}
		return nil, fmt.Errorf("snapshot: the node did not answer within %v (admin --timeout)", c.HTTP.Timeout)
	}
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		return nil, fmt.Errorf("snapshot: %d: %s", resp.StatusCode, strings.TrimSpace(string(b)))
	}
	var meta raft.SnapshotMeta
	mh := resp.Header.Get(SnapshotMetaHeader)
	if err := json.Unmarshal([]byte(mh), &meta); err != nil {
		return nil, fmt.Errorf("snapshot metadata: %w", err)
	}
	if _, err := fmt.Fprintf(w, "%s\n%s\n", backupMagic, mh); err != nil {
		return nil, err
	}
	pr := &progressReader{r: resp.Body, total: meta.Size, fn: progress}
	n, err := io.Copy(w, pr)
	if err != nil {
		return nil, err
	}
	if n != meta.Size {
		return nil, fmt.Errorf("snapshot truncated: got %d of %d bytes", n, meta.Size)
	}
	return &meta, nil
}

// backupMagic heads a snapshot file written by `perpd admin snapshot`.
const backupMagic = "perpd-snapshot v1"

// Restore uploads a backup file written by Snapshot to the leader (any
// member relays it) and returns the resulting applied index and hash.
// restoreAnswerMin is the least a restore waits for the node's answer
// once the upload is done: the node gives raft's restore 2 minutes, then
// proposes a tick and hashes the restored state.
var restoreAnswerMin = 5 * time.Minute

func (c *AdminClient) Restore(ctx context.Context, backup []byte) (*StateView, error) {
	magic, rest, ok := bytes.Cut(backup, []byte("\n"))
	if !ok || string(magic) != backupMagic {
		return nil, fmt.Errorf("not a perpd snapshot file")
	}
	mh, data, ok := bytes.Cut(rest, []byte("\n"))
	if !ok {
		return nil, fmt.Errorf("snapshot file has no metadata line")
	}
	if err := c.plainRefused(); err != nil {
		return nil, err
	}
	// A large upload takes longer than --timeout, so the client's own
	// bound is lifted; the watch bounds the upload's stalls by --timeout
	// and the wait for the answer after it (restoreAnswerMin at least).
	var body io.Reader = bytes.NewReader(data)
	var watch *uploadWatch
	if c.HTTP.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		watch = newUploadWatch(body, int64(len(data)), c.HTTP.Timeout, max(c.HTTP.Timeout, restoreAnswerMin), cancel)
		defer watch.stop()
		body = watch
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url("/admin/restore"), body)
	if err != nil {
		return nil, err
	}
	req.ContentLength = int64(len(data))
	req.Header.Set("Authorization", "Bearer "+c.Token)
	req.Header.Set(SnapshotMetaHeader, string(mh))
	cl := *c.HTTP
	cl.Timeout = 0
	resp, err := cl.Do(req)
	if err != nil {
		if why := watch.stop(); why != "" {
			return nil, fmt.Errorf("restore: %s: %w", why, err)
		}
		return nil, err
	}
	// Answered: the body follows at once (a state view), within the bound.
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return nil, refusal(http.MethodPost, "/admin/restore", resp.StatusCode, b)
	}
	var st StateView
	return &st, json.Unmarshal(b, &st)
}

// uploadWatch reads an upload of size bytes and calls cancel when the
// reader makes no progress for idle, or the answer has not come answer
// after the last byte was read.
type uploadWatch struct {
	r            io.Reader
	size, read   int64
	idle, answer time.Duration
	timer        *time.Timer
	// why says which bound ended the request ("" while none has).
	mu  sync.Mutex
	why string
}

func newUploadWatch(r io.Reader, size int64, idle, answer time.Duration, cancel func()) *uploadWatch {
	u := &uploadWatch{r: r, size: size, idle: idle, answer: answer}
	u.timer = time.AfterFunc(idle, func() {
		u.mu.Lock()
		if u.read < u.size {
			u.why = fmt.Sprintf("the upload made no progress for %v (admin --timeout)", u.idle)
		} else {
			u.why = fmt.Sprintf("the node did not answer within %v of the upload's end", u.answer)
		}
		u.mu.Unlock()
		cancel()
	})
	return u
}

func (u *uploadWatch) Read(p []byte) (int, error) {
	n, err := u.r.Read(p)
	if n > 0 {
		u.mu.Lock()
		u.read += int64(n)
		if u.why == "" {
			if u.read < u.size {
				u.timer.Reset(u.idle)
			} else {
				u.timer.Reset(u.answer)
			}
		}
		u.mu.Unlock()
	}
	return n, err
}

// stop ends the watch and says which bound ended the request, if one did
// (nil: no watch).
func (u *uploadWatch) stop() string {
	if u == nil {
		return ""
	}
	u.timer.Stop()
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.why
}

type progressReader struct {
	r     io.Reader
	done  int64
	total int64
	fn    func(done, total int64)
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.done += int64(n)
	if p.fn != nil {
		p.fn(p.done, p.total)
	}
	return n, err
}

// refusal words an admin call's non-2xx answer: the body's error message,
// or the body itself when it has none.
func refusal(method, path string, status int, body []byte) error {
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error != "" {
		return fmt.Errorf("%s %s: %d: %s", method, path, status, e.Error)
	}
	return fmt.Errorf("%s %s: %d: %s", method, path, status, strings.TrimSpace(string(body)))
}

// ErrJoinRefused means the cluster refused this node's credentials (its
// cluster secret differs): retrying cannot help.
var ErrJoinRefused = errors.New("join refused")

// JoinNode asks an existing member (any: it relays to the leader) to add n
// as a voter, with the cluster's peer credential over the node's own TLS,
// retrying until the cluster answers or ctx ends. A node whose cluster
// secret differs, or whose id is a member at another raft address, gets
// ErrJoinRefused, with the reason, at once: moving that member here would
// evict a live voter in favour of this node (an operator moves one on
// purpose with `perpd admin join --replace`).
func JoinNode(ctx context.Context, n *node.Node, via string) error {
	cfg := n.Config()
	level := fsm.FeatureLevel
	// Fresh goes with every attempt until one may have been acted on: a
	// join whose answer was lost may have made this node a voter, and its
	// retry must not then be refused as a voter that lost its data.
	fresh := n.FreshDataDir()
	// A node holding its raft asks first whether it would be refused
	// (JoinCheckPath, which adds nothing), and hands raft its requests
	// only once not.
	check := n.RaftHeld()
	var last error
	for attempt := 0; ; attempt++ {
		body, err := json.Marshal(JoinRequest{ID: cfg.ID, Raft: n.RaftAddr(), BuildLevel: &level, Deployment: cfg.Deployment, Fresh: fresh})
		if err != nil {
			return err
		}
		path := JoinPath
		if check {
			path = JoinCheckPath
		}
		last = joinOnce(ctx, n, via, path, body)
		if check && (last == nil || errors.Is(last, errNoJoinCheck)) {
			// Not a lost voter: raft may take part, and the join proper
			// needs no fresh (the check asked it). A member of an older
			// build has no check to ask: raft goes as it did there, from
			// now, and the join carries fresh.
			if err := n.AdmitRaft(); err != nil {
				return err
			}
			check, fresh = false, fresh && last != nil
			continue
		}
		if errors.Is(last, errVoterDataLost) {
			// Until the member is removed and the directory emptied, no
			// start may take part: an unheld raft may already have been
			// sent entries, and a restart would then look like a member's.
			if err := n.MarkVoterDataLost(last.Error()); err != nil {
				n.Config().Logger.Error("could not record the refusal in the data directory", "err", err)
			}
		}
		if last == nil || errors.Is(last, ErrJoinRefused) {
			return last
		}
		var op *net.OpError
		if !check && (!errors.As(last, &op) || op.Op != "dial") {
			fresh = false // it may have reached the leader (a check adds nothing)
		}
		// The operator sees why at once and then every ten seconds, not
		// only when the whole wait is over.
		if attempt%joinLogEvery == 0 {
			n.Config().Logger.Warn("join not done yet; retrying", "via", via, "attempt", attempt+1, "err", last)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("join via %s: %w", via, last)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// errVoterDataLost marks the refusal of CodeVoterDataLost.
var errVoterDataLost = errors.New(CodeVoterDataLost)

// joinLogEvery is how many failed join attempts (half a second apart)
// pass between two log lines.
const joinLogEvery = 20

// errNoJoinCheck is a member's 404 at JoinCheckPath: a build before it.
var errNoJoinCheck = errors.New("no join check at this member")

func joinOnce(ctx context.Context, n *node.Node, via, path string, body []byte) error {
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, n.PeerURL(via, path), bytes.NewReader(body))
	if err != nil {
		return err
	}
	n.SetPeerAuth(req)
	req.Header.Set("Content-Type", "application/json")
	resp, err := n.PeerClient().Do(req)
	if err != nil {
		if why := tlsMismatch(err, n.Config().TLS != nil); why != "" {
			return fmt.Errorf("%w: %s at %s: %s (%v)", ErrJoinRefused, path, via, why, err)
		}
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	switch {
	case resp.StatusCode == http.StatusOK:
		return nil
	case resp.StatusCode == http.StatusNotFound && path == JoinCheckPath:
		return errNoJoinCheck
	case resp.StatusCode == http.StatusBadRequest && n.Config().TLS == nil && bytes.Contains(b, []byte("HTTPS server")):
		// net/http's answer to plain HTTP on a TLS listener.
		return fmt.Errorf("%w by %s: its admin listener runs mutual TLS and this node has none: "+
			"start it with --tls-cert, --tls-key and --tls-ca (a node certificate from the cluster CA)", ErrJoinRefused, via)
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return fmt.Errorf("%w by %s: %s", ErrJoinRefused, via, strings.TrimSpace(string(b)))
	}
	var e struct{ Code, Error string }
	if resp.StatusCode == http.StatusConflict && json.Unmarshal(b, &e) == nil {
		switch e.Code {
		case CodeVoterDataLost:
			return fmt.Errorf("%w by %s: %w: %s", ErrJoinRefused, via, errVoterDataLost, e.Error)
		case CodeMemberElsewhere, CodeBuildTooOld, CodeDeploymentMismatch:
			return fmt.Errorf("%w by %s: %s", ErrJoinRefused, via, e.Error)
		}
	}
	return fmt.Errorf("join via %s: %d: %s", via, resp.StatusCode, strings.TrimSpace(string(b)))
}

// tlsMismatch names a join's transport error that only a change of this
// node's settings can cure (so retrying is pointless), or "" for one that
// may pass (a member restarting, a network fault).
func tlsMismatch(err error, withTLS bool) string {
	var unknownCA x509.UnknownAuthorityError
	var op *net.OpError
	var record tls.RecordHeaderError
	switch {
	case errors.As(err, &unknownCA):
		return "the member's certificate is not from this node's --tls-ca: the two run different cluster CAs"
	case errors.As(err, &op) && op.Op == "remote error" && strings.HasPrefix(op.Err.Error(), "tls: "):
		// The member's TLS alert (bad certificate, unknown CA, ...).
		return "the member refused this node's certificate: give it a node certificate from the cluster's CA (--tls-cert, --tls-key, --tls-ca)"
	case withTLS && (errors.As(err, &record) || strings.Contains(err.Error(), "server gave HTTP response to HTTPS client")):
		return "the member's admin listener does not speak TLS while this node does: the cluster runs without TLS, or --join names the wrong port"
	}
	return ""
}

// CheckSameCluster asks the member at via (an admin listener), with this
// node's peer credential, whether the two share a cluster secret. A node
// that restarts with --join but already holds raft state does not join
// again; this catches the one it would have been refused (another
// cluster's data directory under this cluster's command line): the error
// wraps ErrJoinRefused. Any other error means the check could not be made.
func CheckSameCluster(ctx context.Context, n *node.Node, via string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.PeerURL(via, BuildLevelPath), nil)
	if err != nil {
		return err
	}
	n.SetPeerAuth(req)
	resp, err := n.PeerClient().Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	switch resp.StatusCode {
	case http.StatusOK, http.StatusNotFound: // 404: a build before feature levels, which checked the credential first
		return nil
	case http.StatusUnauthorized, http.StatusForbidden:
		return fmt.Errorf("%w by %s: %s", ErrJoinRefused, via, strings.TrimSpace(string(b)))
	default:
		return fmt.Errorf("cluster check via %s: %d: %s", via, resp.StatusCode, strings.TrimSpace(string(b)))
	}
}

// JoinOnStart asks an existing member to add a node through the operator
// routes (the admin token), retrying until the cluster answers or ctx
// ends. Nodes join themselves with JoinNode.
func JoinOnStart(ctx context.Context, via, token, id, raftAddr string) error {
	c := NewAdminClient(via, token)
	var last error
	for {
		if _, err := c.Join(ctx, id, raftAddr, false); err == nil {
			return nil
		} else {
			last = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("join via %s: %w", via, last)
		case <-time.After(500 * time.Millisecond):
		}
	}
}
