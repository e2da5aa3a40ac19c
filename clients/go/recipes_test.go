package lockd

// The recipes against real 3-node clusters (harness_test.go): watch,
// elections, the admin calls, semaphores and shared locks.

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestClusterAWatchResumesOnAnotherNodeMissingAndRepeatingNothing(t *testing.T) {
	c := startCluster(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The watcher starts on node 1 (its first endpoint); the locker never
	// talks to node 1.
	w := newClient(t, c.endpoints())
	locker := newClient(t, []string{c.addrs[2], c.addrs[3]})
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
		clients[i] = newClient(t, c.endpoints())
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
	cl := newClient(t, c.endpoints())
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
		cls = append(cls, newClient(t, c.endpoints()))
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
