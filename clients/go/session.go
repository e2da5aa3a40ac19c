package lockd

import (
	"context"
	"fmt"
	"time"
)

// Session is one lease for many holdings (etcd's concurrency.Session):
// renewed in the background until Close; every lock taken in it lives as
// long as it does, and Lost (of the session and of each of its locks) is
// closed when its lease may have ended.
type Session struct {
	c *Client
	// ID is the session's id; TTL how long it lives without a renewal.
	ID  uint64
	TTL time.Duration
	*lease
}

// OpenSession opens a session of ttl. It carries a request id, so it is
// retried safely through a leader change.
func (c *Client) OpenSession(ctx context.Context, ttl time.Duration) (*Session, error) {
	ms := ttl.Milliseconds()
	if ms <= 0 {
		return nil, fmt.Errorf("lockd: a session's TTL must be at least 1 ms, not %v", ttl)
	}
	var got struct {
		ID    uint64 `json:"id"`
		TTLMS int64  `json:"ttl_ms"`
	}
	sent := time.Now()
	body := map[string]any{"ttl_ms": ms, "owner": c.owner, "request_id": randomID()}
	if err := c.do(ctx, call{method: "POST", path: "/v1/sessions", body: body, idempotent: true}, &got); err != nil {
		return nil, err
	}
	if got.ID == 0 || got.TTLMS <= 0 {
		return nil, fmt.Errorf("lockd: a session opened without an id or TTL: %+v", got)
	}
	if got.TTLMS < ms {
		ms = got.TTLMS
	}
	s := &Session{c: c, ID: got.ID, TTL: time.Duration(ms) * time.Millisecond}
	s.lease = newLease(fmt.Sprintf("session %d", s.ID), s.TTL, sent, s.renew)
	go s.keep()
	return s, nil
}

// Lock takes key in the session (see Client.Lock for opts): the lock
// lives as long as the session, and its Lost is the session's.
func (s *Session) Lock(ctx context.Context, key string, opts ...LockOption) (*Lock, error) {
	return s.c.Lock(ctx, key, s.TTL, append(opts, func(a *acquire) { a.session = s })...)
}

// TryLock takes key in the session if it is free now, or fails with
// ErrHeld.
func (s *Session) TryLock(ctx context.Context, key string, opts ...LockOption) (*Lock, error) {
	return s.Lock(ctx, key, append(opts, Wait(0))...)
}

// Close ends the session and every holding in it, in one log entry. An
// error wrapping ErrUnknown means the answer was lost: the TTL ends it at
// the latest.
func (s *Session) Close(ctx context.Context) error {
	s.halt()
	return s.c.do(ctx, call{method: "DELETE", path: fmt.Sprintf("/v1/sessions/%d", s.ID)}, nil)
}

// renew sends one keepalive of the session: the TTL it got.
func (s *Session) renew(ctx context.Context) (time.Duration, error) {
	var got struct {
		TTLMS int64 `json:"ttl_ms"`
	}
	path := fmt.Sprintf("/v1/sessions/%d/keepalive", s.ID)
	if err := s.c.do(ctx, call{method: "POST", path: path, idempotent: true}, &got); err != nil {
		return 0, err
	}
	if got.TTLMS <= 0 {
		return 0, fmt.Errorf("lockd: keepalive of session %d answered a TTL of %d ms", s.ID, got.TTLMS)
	}
	return time.Duration(got.TTLMS) * time.Millisecond, nil
}
