package lockd

// Tests against real 3-node lockd clusters: the binary LOCKD_BIN names
// (scripts/test-go.sh sets it to the one the Rust tests ran). Without it
// they are skipped, and the script fails on a skip.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// cluster is three `lockd serve` processes on loopback.
type cluster struct {
	t     *testing.T
	bin   string
	dir   string
	addrs map[int]string
	procs map[int]*exec.Cmd
	// scheme and web: how the harness itself reads a node's status.
	scheme string
	web    *http.Client
	// args: each node's own extra flags (TLS, the auth file).
	args func(i int) []string
}

// startCluster starts three nodes and waits for a leader they agree on.
func startCluster(t *testing.T) *cluster {
	t.Helper()
	c := newCluster(t)
	c.start()
	return c
}

// newCluster: a cluster not started yet.
func newCluster(t *testing.T) *cluster {
	t.Helper()
	bin := os.Getenv("LOCKD_BIN")
	if bin == "" {
		t.Skip("LOCKD_BIN is not set: no lockd binary to run clusters of")
	}
	return &cluster{t: t, bin: bin, dir: t.TempDir(), addrs: map[int]string{}, procs: map[int]*exec.Cmd{},
		scheme: "http", web: &http.Client{Timeout: 2 * time.Second}, args: func(int) []string { return nil }}
}

// start starts three nodes and waits for a leader they agree on.
func (c *cluster) start() {
	t := c.t
	var initial []string
	for i := 1; i <= 3; i++ {
		c.addrs[i] = "127.0.0.1:" + freePort(t)
		initial = append(initial, fmt.Sprintf("%d=%s", i, c.addrs[i]))
	}
	for i := 1; i <= 3; i++ {
		c.spawn(i, strings.Join(initial, ","))
	}
	t.Cleanup(c.stop)
	c.waitLeader(0)
}

// freePort is a loopback port nobody listens on now.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}

func (c *cluster) spawn(i int, initial string) {
	log, err := os.Create(filepath.Join(c.dir, fmt.Sprintf("n%d.log", i)))
	if err != nil {
		c.t.Fatal(err)
	}
	defer log.Close()
	// The Raft timings of the other clients' cluster tests: a loaded
	// 2-core machine starts no spurious elections with them.
	cmd := exec.Command(c.bin, "serve", "--id", fmt.Sprint(i), "--addr", c.addrs[i],
		"--data-dir", filepath.Join(c.dir, fmt.Sprintf("n%d", i)), "--initial-cluster", initial,
		"--heartbeat-ms", "50", "--election-timeout-ms", "400")
	cmd.Args = append(cmd.Args, c.args(i)...)
	cmd.Stderr = log
	cmd.Env = append(os.Environ(), "RUST_LOG=info,openraft=warn")
	if cache := os.Getenv("LOCKD_MODULE_CACHE"); cache == "" {
		cmd.Env = append(cmd.Env, "LOCKD_MODULE_CACHE="+filepath.Join(filepath.Dir(c.bin), "test-module-cache"))
	}
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.procs[i] = cmd
}

// kill SIGKILLs node i.
func (c *cluster) kill(i int) {
	if p := c.procs[i]; p != nil {
		_ = p.Process.Kill()
		_ = p.Wait()
		delete(c.procs, i)
	}
}

func (c *cluster) stop() {
	for i := range c.procs {
		c.kill(i)
	}
}

func (c *cluster) endpoints() []string {
	var e []string
	for i := 1; i <= 3; i++ {
		e = append(e, c.addrs[i])
	}
	return e
}

// waitLeader is the leader every running node but without agrees on.
func (c *cluster) waitLeader(without int) int {
	c.t.Helper()
	end := time.Now().Add(30 * time.Second)
	for time.Now().Before(end) {
		seen := map[uint64]bool{}
		leads := 0
		for i := range c.procs {
			if i == without {
				continue
			}
			var st struct {
				Role   string  `json:"role"`
				Leader *uint64 `json:"leader"`
			}
			if getJSON(c.web, c.scheme+"://"+c.addrs[i]+"/v1/status", &st) != nil || st.Leader == nil {
				seen[0] = true
				continue
			}
			seen[*st.Leader] = true
			if st.Role == "leader" {
				leads = i
			}
		}
		if len(seen) == 1 && leads != 0 && seen[uint64(leads)] {
			return leads
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.t.Fatalf("no agreed leader within 30 s; logs in %s", c.dir)
	return 0
}

func getJSON(web *http.Client, url string, out any) error {
	resp, err := web.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

func TestClusterLockHandsOverWithLargerTokens(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	a, err := New(c.endpoints())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := New(c.endpoints())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	first, err := a.TryLock(ctx, "go/jobs/1", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// Its holder sees its token; another client sees the holding.
	hs, err := a.Holders(ctx, "go/jobs/1")
	if err != nil || len(hs) != 1 || hs[0].Token == nil || *hs[0].Token != first.Token || hs[0].Holder == nil || hs[0].Holder.Owner != a.Owner() {
		t.Fatalf("holders: %+v, %v", hs, err)
	}
	page, err := b.List(ctx, "go/jobs/", "", 10)
	if err != nil || len(page.Locks) != 1 || page.Locks[0].Key != "go/jobs/1" || page.Index == 0 {
		t.Fatalf("list: %+v, %v", page, err)
	}
	st, err := b.Status(ctx)
	if err != nil || st.Leader == nil || st.LocksHeld == 0 {
		t.Fatalf("status: %+v, %v", st, err)
	}
	_, err = b.TryLock(ctx, "go/jobs/1", 5*time.Second)
	var e *Error
	if !errors.Is(err, ErrHeld) || !errors.As(err, &e) || e.Code != CodeHeld {
		t.Fatalf("a held key: want ErrHeld, got %v", err)
	}
	// A waiter is handed the key when it is released.
	got := make(chan *Lock, 1)
	go func() {
		l, err := b.Lock(ctx, "go/jobs/1", 5*time.Second, Wait(10*time.Second))
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	second := <-got
	if second == nil {
		t.FailNow()
	}
	defer second.Release(ctx)
	if second.Token <= first.Token {
		t.Fatalf("tokens must grow: %d then %d", first.Token, second.Token)
	}
}

func TestClusterBadInputGetsTypedErrors(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	cl, err := New(c.endpoints())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	cases := []struct {
		key   string
		lease time.Duration
		code  Code
	}{
		{strings.Repeat("k", 5000), time.Second, CodeInvalidKey},
		{"go/lease", 1000 * time.Hour, CodeInvalidLease},
	}
	for _, tc := range cases {
		_, err := cl.TryLock(ctx, tc.key, tc.lease)
		var e *Error
		if !errors.Is(err, ErrBadRequest) || !errors.As(err, &e) || e.Code != tc.code || e.Status != 400 {
			t.Errorf("%d-byte key, lease %v: want %s, got %v", len(tc.key), tc.lease, tc.code, err)
		}
	}
}

func TestClusterALockSurvivesItsLeaderOrIsLostNeverSilentlyDoubled(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	holder, err := New(c.endpoints(), WithRequestTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	other, err := New(c.endpoints(), WithRequestTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	l, err := holder.TryLock(ctx, "go/failover", 1500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	leader := c.waitLeader(0)
	c.kill(leader)
	c.waitLeader(leader)
	// For three leases: whenever the other client gets the key, the
	// holder must already know its lease may have ended.
	end := time.Now().Add(3 * l.Lease)
	for time.Now().Before(end) {
		got, err := other.TryLock(ctx, "go/failover", time.Second)
		if err == nil {
			select {
			case <-l.Lost():
			default:
				if time.Now().Before(l.Deadline()) {
					t.Fatalf("token %d granted while the holder (token %d) believed it held until %v", got.Token, l.Token, l.Deadline())
				}
			}
			_ = got.Release(ctx)
			return // the lock was lost and said so: allowed
		}
		if !errors.Is(err, ErrHeld) && !errors.Is(err, ErrUnavailable) {
			t.Fatalf("unexpected error: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	select {
	case <-l.Lost():
		t.Fatalf("the lock was lost (%v) yet nobody else could take it", l.Err())
	default:
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("the lock survived the leader's death, so its release must succeed: %v", err)
	}
}

func TestClusterASessionKeepsItsLocksUntilClosed(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	cl, err := New(c.endpoints())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	other, err := New(c.endpoints())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	s, err := cl.OpenSession(ctx, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.TryLock(ctx, "go/s/a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.TryLock(ctx, "go/s/b"); err != nil {
		t.Fatal(err)
	}
	if a.Lost() != s.Lost() {
		t.Fatal("a lock in a session must share the session's Lost")
	}
	// Past the TTL: the session's renewals keep both holdings.
	time.Sleep(1500 * time.Millisecond)
	for _, k := range []string{"go/s/a", "go/s/b"} {
		if _, err := other.TryLock(ctx, k, time.Second); !errors.Is(err, ErrHeld) {
			t.Fatalf("%s past the TTL: want ErrHeld, got %v (session err %v)", k, err, s.Err())
		}
	}
	// Closing it frees both at once.
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"go/s/a", "go/s/b"} {
		l, err := other.TryLock(ctx, k, time.Second)
		if err != nil {
			t.Fatalf("%s after the close: %v", k, err)
		}
		_ = l.Release(ctx)
	}
}

func TestClusterAWatchResumesOnAnotherNodeMissingAndRepeatingNothing(t *testing.T) {
	c := startCluster(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The watcher starts on node 1 (its first endpoint); the locker never
	// talks to node 1.
	w, err := New(c.endpoints())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	locker, err := New([]string{c.addrs[2], c.addrs[3]})
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close()
	page, err := locker.List(ctx, "go/w/", "", 10)
	if err != nil {
		t.Fatal(err)
	}
	events, done := w.Watch(ctx, "go/w/", page.Index+1)
	cycle := func(key string) {
		l, err := locker.TryLock(ctx, key, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Each cycle shows as a grant then a release of its key, in one
	// sequence of growing indexes.
	var last uint64
	expect := func(key string) {
		for _, want := range []string{"granted", "released"} {
			select {
			case e, ok := <-events:
				if !ok {
					t.Fatalf("the watch ended: %v", <-done)
				}
				if e.Index <= last || len(e.Changes) != 1 || e.Changes[0].Key != key || e.Changes[0].Type != want {
					t.Fatalf("after index %d want %s %s, got %+v", last, want, key, e)
				}
				last = e.Index
			case <-time.After(30 * time.Second):
				t.Fatalf("no %s of %s within 30 s", want, key)
			}
		}
	}
	cycle("go/w/1")
	expect("go/w/1")
	c.kill(1)
	cycle("go/w/2")
	expect("go/w/2")
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("a watch ended by its context ends without error, got %v", err)
	}
}

// next reads ch until it gives want, for up to 30 s.
func next(t *testing.T, ch <-chan string, want string) {
	t.Helper()
	end := time.After(30 * time.Second)
	for {
		select {
		case v, ok := <-ch:
			if !ok {
				t.Fatalf("the channel closed before %q", want)
			}
			if v == want {
				return
			}
		case <-end:
			t.Fatalf("no %q within 30 s", want)
		}
	}
}

func TestClusterAnElectionWithEtcdsAndClientGosShapes(t *testing.T) {
	c := startCluster(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clients := make([]*Client, 3)
	for i := range clients {
		cl, err := New(c.endpoints())
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		clients[i] = cl
	}
	seen := clients[2].NewElection("go/e").Observe(ctx)
	next(t, seen, "")
	a, err := clients[0].NewElection("go/e").Campaign(ctx, "a", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	next(t, seen, "a")
	// The other candidate waits while a leads.
	won := make(chan *Lock, 1)
	go func() {
		l, err := clients[1].NewElection("go/e").Campaign(ctx, "b", 5*time.Second)
		if err != nil {
			t.Error(err)
		}
		won <- l
	}()
	if err := a.Proclaim(ctx, "a2"); err != nil {
		t.Fatal(err)
	}
	next(t, seen, "a2")
	if v, err := clients[2].NewElection("go/e").Leader(ctx); err != nil || v != "a2" {
		t.Fatalf("leader %q, %v", v, err)
	}
	if err := a.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	b := <-won
	if b == nil {
		t.FailNow()
	}
	next(t, seen, "b")
	// client-go's shape: r leads once b resigns, and stops leading (its
	// context cancelled first) when the run ends.
	started, stopped, leaders := make(chan context.Context, 1), make(chan struct{}), make(chan string, 16)
	run, end := context.WithCancel(ctx)
	go func() {
		clients[0].RunLeaderElection(run, LeaderElectionConfig{
			Key: "go/e", Identity: "r", Lease: 5 * time.Second,
			OnStartedLeading: func(lctx context.Context) { started <- lctx; <-lctx.Done() },
			OnStoppedLeading: func() { close(stopped) },
			OnNewLeader:      func(id string) { leaders <- id },
		})
	}()
	if err := b.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	var leading context.Context
	select {
	case leading = <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("r never led")
	}
	next(t, leaders, "r")
	end()
	select {
	case <-stopped:
	case <-time.After(30 * time.Second):
		t.Fatal("OnStoppedLeading never ran")
	}
	if leading.Err() == nil {
		t.Fatal("the leading context must be cancelled when leading stops")
	}
	next(t, seen, "")
}

func TestClusterTheAdminCallsAScriptMakes(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	cl, err := New(c.endpoints())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := 1; i <= 3; i++ {
		if err := cl.Healthy(ctx, c.addrs[i]); err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
	}
	ms, err := cl.Members(ctx)
	if err != nil || len(ms) != 3 || !ms[0].Voter {
		t.Fatalf("members %+v, %v", ms, err)
	}
	l, err := cl.TryLock(ctx, "go/backup", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	// A backup that lockd restore takes (the cluster trusts no module key,
	// so the backup requires no signature, which restore must be told).
	path := filepath.Join(c.dir, "backup.snap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.SnapshotSave(ctx, f); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	run(t, c.bin, "restore", "--snapshot", path, "--id", "1", "--data-dir", filepath.Join(c.dir, "restored"),
		"--initial-cluster", "1=127.0.0.1:1", "--allow-unsigned-backup")
	// Bytes that are no module: refused with the code, nothing proposed.
	var e *Error
	if _, err := cl.Upgrade(ctx, []byte("not a module"), UpgradeOptions{}); !errors.As(err, &e) || e.Code != "invalid_module" || e.Status != 400 {
		t.Fatalf("upgrade of junk: want invalid_module, got %v", err)
	}
	if _, err := cl.Shadow(ctx, []byte("not a module"), UpgradeOptions{}); !errors.As(err, &e) || e.Code != "invalid_module" {
		t.Fatalf("shadow of junk: want invalid_module, got %v", err)
	}
	if _, err := cl.AbortShadow(ctx); !errors.As(err, &e) || e.Code != "no_shadow" || e.Status != 404 {
		t.Fatalf("abort without a shadow: want no_shadow, got %v", err)
	}
}

func TestClusterSemaphoresSharedAndReentrantLocks(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	var cls []*Client
	for i := 0; i < 3; i++ {
		cl, err := New(c.endpoints())
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		cls = append(cls, cl)
	}
	var held []*Lock
	defer func() {
		for _, l := range held {
			_ = l.Release(ctx)
		}
	}()
	// A semaphore of two: two holders, the third refused.
	for i := 0; i < 2; i++ {
		l, err := cls[i].TryLock(ctx, "go/sem", time.Minute, Semaphore(2))
		if err != nil {
			t.Fatalf("slot %d: %v", i, err)
		}
		held = append(held, l)
	}
	if _, err := cls[2].TryLock(ctx, "go/sem", time.Minute, Semaphore(2)); !errors.Is(err, ErrHeld) {
		t.Fatalf("a third holder of two slots: want ErrHeld, got %v", err)
	}
	// Readers share; a writer waits for them.
	for i := 0; i < 2; i++ {
		l, err := cls[i].TryLock(ctx, "go/rw", time.Minute, Shared(0))
		if err != nil {
			t.Fatalf("reader %d: %v", i, err)
		}
		held = append(held, l)
	}
	if _, err := cls[2].TryLock(ctx, "go/rw", time.Minute); !errors.Is(err, ErrHeld) {
		t.Fatalf("a writer beside readers: want ErrHeld, got %v", err)
	}
	// Reentrant: the same owner enters again with the same token.
	first, err := cls[0].TryLock(ctx, "go/re", time.Minute, Reentrant())
	if err != nil {
		t.Fatal(err)
	}
	held = append(held, first)
	again, err := cls[0].TryLock(ctx, "go/re", time.Minute, Reentrant())
	if err != nil || again.Token != first.Token || again.Count != 2 {
		t.Fatalf("entered again: %+v, %v (first token %d)", again, err, first.Token)
	}
	held = append(held, again)
}
