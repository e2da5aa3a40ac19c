package lockd

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// waitChunk: Lock without a bound waits in requests of this long, one
// after another (a node's --max-wait-ms is 30 s by default).
const waitChunk = 30 * time.Second

// LockOption shapes an acquire.
type LockOption func(*acquire)

type acquire struct {
	wait      time.Duration
	bounded   bool
	mode      string
	limit     uint32
	reentrant bool
	value     string
	requestID string
	session   *Session
}

// Wait bounds how long Lock waits while the key is busy (ErrHeld after
// it). Without it, Lock waits until its context is done.
func Wait(d time.Duration) LockOption {
	return func(a *acquire) { a.wait, a.bounded = d, true }
}

// Shared takes one of at most limit shared (reader) holdings; 0 lets the
// key's readers or the module decide.
func Shared(limit uint32) LockOption {
	return func(a *acquire) { a.mode, a.limit = "shared", limit }
}

// Semaphore takes one of limit exclusive holdings (1 is a mutex).
func Semaphore(limit uint32) LockOption {
	return func(a *acquire) { a.mode, a.limit = "exclusive", limit }
}

// Reentrant enters the lock again when this client's owner holds it
// already: the same token, a count one higher.
func Reentrant() LockOption { return func(a *acquire) { a.reentrant = true } }

// Value publishes v with the holding (an election's leader value).
func Value(v string) LockOption { return func(a *acquire) { a.value = v } }

// RequestID sets the acquire's request id (default: a random one). With
// the client's owner it makes a retry return the grant that committed.
func RequestID(id string) LockOption { return func(a *acquire) { a.requestID = id } }

// Lock is a held lock. Its lease is renewed in the background until
// Release (in a session, the session's is); Lost is closed when the lease
// may have ended.
type Lock struct {
	c *Client
	// Key is the lock's key; Token its fencing token, larger than every
	// token granted before; Lease the lease renewed to; Count how often
	// this owner entered it (reentrant).
	Key   string
	Token uint64
	Lease time.Duration
	Count uint32

	*lease
	// own: the lease is this lock's (not its session's).
	own bool
}

// TryLock takes key for lease if it is free now, or fails with ErrHeld.
func (c *Client) TryLock(ctx context.Context, key string, lease time.Duration, opts ...LockOption) (*Lock, error) {
	return c.Lock(ctx, key, lease, append(opts, Wait(0))...)
}

// Lock takes key for lease, waiting while it is busy (until ctx is done,
// or as long as Wait allows). The lock's deadline counts from before the
// request was sent; its lease is renewed until Release.
func (c *Client) Lock(ctx context.Context, key string, lease time.Duration, opts ...LockOption) (*Lock, error) {
	a := acquire{mode: "exclusive", limit: 1}
	for _, o := range opts {
		o(&a)
	}
	if a.requestID == "" {
		a.requestID = randomID()
	}
	ms := lease.Milliseconds()
	if ms <= 0 {
		return nil, fmt.Errorf("lockd: lock %q: a lease must be at least 1 ms, not %v", key, lease)
	}
	for {
		wait := a.wait
		if !a.bounded {
			wait = waitChunk
			if d, ok := ctx.Deadline(); ok && time.Until(d) < wait {
				wait = time.Until(d)
			}
			if wait < 0 {
				wait = 0
			}
		}
		body := map[string]any{
			"lease_ms":   ms,
			"wait_ms":    wait.Milliseconds(),
			"mode":       a.mode,
			"owner":      c.owner,
			"request_id": a.requestID,
		}
		if a.limit != 0 {
			body["limit"] = a.limit
		}
		if a.reentrant {
			body["reentrant"] = true
		}
		if a.value != "" {
			body["value"] = a.value
		}
		if a.session != nil {
			body["session"] = a.session.ID
		}
		var got struct {
			Token   uint64 `json:"token"`
			LeaseMS int64  `json:"lease_ms"`
			Count   uint32 `json:"count"`
		}
		sent := time.Now()
		// A request id makes the acquire safe to send again.
		err := c.do(ctx, call{method: "POST", path: keyPath(key, "acquire"), body: body, idempotent: true, wait: wait}, &got)
		if errors.Is(err, ErrHeld) && !a.bounded && ctx.Err() == nil {
			continue
		}
		if err != nil {
			return nil, err
		}
		if got.Token == 0 || got.LeaseMS <= 0 {
			return nil, fmt.Errorf("lockd: lock %q: a grant without a token or lease: %+v", key, got)
		}
		if got.LeaseMS < ms {
			ms = got.LeaseMS // a module may shorten it, never lengthen it
		}
		l := &Lock{c: c, Key: key, Token: got.Token, Lease: time.Duration(ms) * time.Millisecond, Count: got.Count}
		if a.session != nil {
			l.lease = a.session.lease
			return l, nil
		}
		l.own = true
		l.lease = newLease(fmt.Sprintf("%q (token %d)", key, l.Token), l.Lease, sent, l.renew)
		if time.Since(sent) > l.Lease/3 {
			// A long wait spent most of the deadline: renew at once.
			if err := l.refresh(ctx); err != nil {
				return nil, fmt.Errorf("lockd: %q was granted (token %d) but could not be renewed: %w", key, l.Token, err)
			}
		}
		go l.keep()
		return l, nil
	}
}

// Release stops the renewals and gives the lock up (in a session, the
// session lives on). An error wrapping ErrUnknown means the release's
// answer was lost: the lease ends it at the latest.
func (l *Lock) Release(ctx context.Context) error {
	if l.own {
		l.halt()
	}
	body := map[string]any{"token": l.Token}
	return l.c.do(ctx, call{method: "POST", path: keyPath(l.Key, "release"), body: body}, nil)
}

// renew sends one keepalive of the lock's own lease: the lease it got.
func (l *Lock) renew(ctx context.Context) (time.Duration, error) {
	var got struct {
		LeaseMS int64 `json:"lease_ms"`
	}
	err := l.c.do(ctx, call{method: "POST", path: keyPath(l.Key, "keepalive"),
		body: map[string]any{"token": l.Token}, idempotent: true}, &got)
	if err != nil {
		return 0, err
	}
	if got.LeaseMS <= 0 {
		return 0, fmt.Errorf("lockd: keepalive of %q answered a lease of %d ms", l.Key, got.LeaseMS)
	}
	return time.Duration(got.LeaseMS) * time.Millisecond, nil
}
