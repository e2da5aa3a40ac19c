package lockd

import (
	"context"
	"errors"
	"sync"
	"time"
)

// lease is what a held lock or a session lives on: a local deadline,
// renewed in the background every third of the lease, and a Lost channel
// closed once the lease may have ended.
type lease struct {
	what string
	// max: never believe a longer lease than this (what was asked for).
	max   time.Duration
	renew func(ctx context.Context) (time.Duration, error)

	mu       sync.Mutex
	deadline time.Time
	err      error
	lost     chan struct{}
	stop     chan struct{}
	stopped  sync.Once
	done     chan struct{}
}

// newLease: a lease of max granted to a request sent at sent.
func newLease(what string, max time.Duration, sent time.Time, renew func(context.Context) (time.Duration, error)) *lease {
	return &lease{
		what: what, max: max, renew: renew, deadline: sent.Add(max),
		lost: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{}),
	}
}

// Deadline is when the lease may end unless renewed, on this machine's
// clock, counted from before the last acknowledged renewal was sent.
func (l *lease) Deadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline
}

// Lost is closed when the lease may have ended; Err says why.
func (l *lease) Lost() <-chan struct{} { return l.lost }

// Err is nil while the lease is believed alive; after Lost closed it
// wraps ErrLockLost and the cause (a refusal such as ErrNotHeld, or no
// renewal acknowledged before the deadline).
func (l *lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// refresh renews once; on success the deadline moves to the renewal's
// send time plus the lease it got (at most max).
func (l *lease) refresh(ctx context.Context) error {
	sent := time.Now()
	got, err := l.renew(ctx)
	if err != nil {
		return err
	}
	if got > l.max {
		got = l.max
	}
	l.mu.Lock()
	if d := sent.Add(got); d.After(l.deadline) {
		l.deadline = d
	}
	l.mu.Unlock()
	return nil
}

// keep renews every third of the lease until halt, or marks it lost.
func (l *lease) keep() {
	defer close(l.done)
	tick := time.NewTicker(l.max / 3)
	defer tick.Stop()
	for {
		deadline := time.NewTimer(time.Until(l.Deadline()))
		select {
		case <-l.stop:
			deadline.Stop()
			return
		case <-deadline.C:
			l.lose(errors.New("no renewal was acknowledged before the lease's deadline"))
			return
		case <-tick.C:
			deadline.Stop()
			ctx, cancel := context.WithDeadline(context.Background(), l.Deadline())
			err := l.refresh(ctx)
			cancel()
			if refused(err) {
				l.lose(err) // renewing again will not work
				return
			}
		}
	}
}

// halt stops the renewals and waits for them to end (if they ran).
func (l *lease) halt() {
	l.stopped.Do(func() { close(l.stop) })
	select {
	case <-l.done:
	case <-l.lost:
	}
}

// lose marks the lease lost with cause.
func (l *lease) lose(cause error) {
	l.mu.Lock()
	l.err = &wrapped{is: ErrLockLost, what: "lockd: the lease of " + l.what + " may have ended", cause: cause}
	l.mu.Unlock()
	close(l.lost)
}

// refused: err is a node's refusal of the request itself (not held, not
// the holder's token, not allowed), not a passing state such as a full
// node (429) or a slow body (408).
func refused(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Status >= 400 && e.Status < 500 && e.Status != 408 && e.Status != 429
}
