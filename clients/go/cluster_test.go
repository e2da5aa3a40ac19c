package lockd

// Locks against real 3-node clusters (harness_test.go).

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestClusterLockHandsOverWithLargerTokens(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	a := newClient(t, c.endpoints())
	b := newClient(t, c.endpoints())
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
	cl := newClient(t, c.endpoints())
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
	holder := newClient(t, c.endpoints(), WithRequestTimeout(time.Second))
	other := newClient(t, c.endpoints(), WithRequestTimeout(time.Second))
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
	cl := newClient(t, c.endpoints())
	other := newClient(t, c.endpoints())
	opened := time.Now()
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
	// Wait until the TTL counted from the open has passed while a renewal
	// keeps the session's deadline ahead of now.
	end := time.Now().Add(10 * time.Second)
	for !(time.Now().After(opened.Add(s.TTL+200*time.Millisecond)) && s.Deadline().After(time.Now())) {
		if time.Now().After(end) || s.Err() != nil {
			t.Fatalf("the session was not renewed past its TTL: %v", s.Err())
		}
		time.Sleep(20 * time.Millisecond)
	}
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

func TestClusterLostFiresWhenTheKeepaliveCannotReachAQuorum(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	cl := newClient(t, c.endpoints(), WithRequestTimeout(500*time.Millisecond), WithRetryFor(time.Second))
	l, err := cl.TryLock(ctx, "go/quorum", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// Both followers stopped: the leader can renew nothing.
	leader := c.waitLeader(0)
	for i := range c.procs {
		if i != leader {
			c.pause(i)
		}
	}
	select {
	case <-l.Lost():
	case <-time.After(15 * time.Second):
		t.Fatal("Lost never fired without a quorum")
	}
	if !errors.Is(l.Err(), ErrLockLost) || time.Now().Before(l.Deadline()) {
		t.Fatalf("lost %v before its deadline %v", l.Err(), l.Deadline())
	}
}
