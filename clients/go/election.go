package lockd

import (
	"context"
	"errors"
	"time"
)

// Election is a leader election on one key, with etcd's shape
// (concurrency.Election): the leader is the key's holder, and its value
// is the leader's published value. The module must keep values (world
// 0.3, the default).
type Election struct {
	c   *Client
	key string
}

// NewElection is the election on key.
func (c *Client) NewElection(key string) *Election { return &Election{c: c, key: key} }

// Campaign waits until this client leads (or ctx is done), publishing
// value; the returned lock is the leadership: renewed in the background,
// Lost when it may have ended, Resign to give it up.
func (e *Election) Campaign(ctx context.Context, value string, lease time.Duration) (*Lock, error) {
	return e.c.Lock(ctx, e.key, lease, Value(value))
}

// Proclaim publishes a new value of the leadership l holds.
func (l *Lock) Proclaim(ctx context.Context, value string) error {
	body := map[string]any{"token": l.Token, "value": value}
	// A value set twice changes nothing twice: safe to send again.
	return l.c.do(ctx, call{method: "POST", path: keyPath(l.Key, "proclaim"), body: body, idempotent: true}, nil)
}

// Resign gives the leadership up (its Release).
func (l *Lock) Resign(ctx context.Context) error { return l.Release(ctx) }

// ErrNoLeader: the election has no leader now.
var ErrNoLeader = errors.New("lockd: the election has no leader")

// Leader is the current leader's value (ErrNoLeader when nobody leads).
func (e *Election) Leader(ctx context.Context) (string, error) {
	hs, err := e.c.Holders(ctx, e.key)
	if err != nil {
		return "", err
	}
	if len(hs) == 0 {
		return "", ErrNoLeader
	}
	return hs[0].Value, nil
}

// Observe sends the leader's value each time it changes ("" while nobody
// leads), starting with the current one, until ctx is done; the channel
// then closes. It follows a watch of the key, which resumes on another
// node by itself.
func (e *Election) Observe(ctx context.Context) <-chan string {
	out := make(chan string)
	go func() {
		defer close(out)
		for ctx.Err() == nil {
			e.observe(ctx, out)
		}
	}()
	return out
}

// observe: the leader now, then its changes, until the watch ends.
func (e *Election) observe(ctx context.Context, out chan<- string) {
	page, err := e.c.List(ctx, e.key, "", 1)
	if err != nil {
		sleep(ctx, 100*time.Millisecond)
		return
	}
	leader := ""
	if len(page.Locks) == 1 && page.Locks[0].Key == e.key && len(page.Locks[0].Holders) > 0 {
		leader = page.Locks[0].Holders[0].Value
	}
	if !send(ctx, out, leader) {
		return
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events, done := e.c.Watch(wctx, e.key, page.Index+1)
	for ev := range events {
		for _, ch := range ev.Changes {
			if ch.Key != e.key {
				continue // another key with this one as a prefix
			}
			next := leader
			switch ch.Type {
			case "granted", "value":
				next = ""
				if ch.Value != nil {
					next = *ch.Value
				}
			case "released", "expired":
				next = ""
			}
			if next != leader {
				leader = next
				if !send(ctx, out, leader) {
					return
				}
			}
		}
	}
	<-done
}

func send(ctx context.Context, out chan<- string, v string) bool {
	select {
	case out <- v:
		return true
	case <-ctx.Done():
		return false
	}
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// LeaderElectionConfig is RunLeaderElection's, with client-go's shape
// (tools/leaderelection): the callbacks run on their own goroutines.
type LeaderElectionConfig struct {
	// Key is the election's key; Identity this candidate's value.
	Key      string
	Identity string
	// Lease is how long a leadership lasts without a renewal.
	Lease time.Duration
	// OnStartedLeading runs when this candidate leads; its context is
	// cancelled as soon as the leadership may have been lost (or on
	// shutdown), and it must return then: the leadership is resigned
	// only after it returned.
	OnStartedLeading func(ctx context.Context)
	// OnStoppedLeading runs when a leadership of this candidate ended.
	OnStoppedLeading func()
	// OnNewLeader runs with each new leader's identity ("" for none).
	OnNewLeader func(identity string)
}

// RunLeaderElection campaigns until ctx is done: it leads whenever it can,
// running OnStartedLeading with a context cancelled when the leadership
// may have been lost, then campaigns again. It resigns on return.
func (c *Client) RunLeaderElection(ctx context.Context, cfg LeaderElectionConfig) {
	e := c.NewElection(cfg.Key)
	if cfg.OnNewLeader != nil {
		go func() {
			for id := range e.Observe(ctx) {
				cfg.OnNewLeader(id)
			}
		}()
	}
	for ctx.Err() == nil {
		l, err := e.Campaign(ctx, cfg.Identity, cfg.Lease)
		if err != nil {
			sleep(ctx, 100*time.Millisecond)
			continue
		}
		leading, stop := context.WithCancel(ctx)
		ended := make(chan struct{})
		go func() {
			defer close(ended)
			if cfg.OnStartedLeading != nil {
				cfg.OnStartedLeading(leading)
			}
		}()
		select {
		case <-l.Lost():
		case <-ctx.Done():
		}
		stop()
		<-ended
		release, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = l.Resign(release)
		cancel()
		if cfg.OnStoppedLeading != nil {
			cfg.OnStoppedLeading()
		}
	}
}
