package lockd

import (
	"context"
	"fmt"
	"net/url"
)

// Holding is one holder of a key, as a node reports it.
type Holding struct {
	// Token is nil when it is another principal's holding.
	Token *uint64 `json:"token"`
	Mode  string  `json:"mode"`
	Limit uint32  `json:"limit"`
	Count uint32  `json:"count"`
	// LeaseMS is the lease granted or last renewed to; LeaseLeftMS what
	// was left of it on the leader's clock (nil: not timed there yet).
	LeaseMS     uint64  `json:"lease_ms"`
	LeaseLeftMS *uint64 `json:"lease_left_ms"`
	Session     *uint64 `json:"session"`
	Value       string  `json:"value"`
	Holder      *struct {
		Owner     string `json:"owner"`
		Principal string `json:"principal"`
	} `json:"holder"`
}

// Holders is who holds key now (none: free), read linearizably.
func (c *Client) Holders(ctx context.Context, key string) ([]Holding, error) {
	var got struct {
		Holders []Holding `json:"holders"`
	}
	if err := c.do(ctx, call{method: "GET", path: keyPath(key, ""), idempotent: true}, &got); err != nil {
		return nil, err
	}
	return got.Holders, nil
}

// KeyHoldings is a held key and its holders.
type KeyHoldings struct {
	Key     string    `json:"key"`
	Holders []Holding `json:"holders"`
}

// Page is a page of held keys: Next is where the next page starts (""
// after the last), Index the log index it was read at (a watch from
// Index+1 misses no change after it).
type Page struct {
	Locks []KeyHoldings `json:"locks"`
	Next  *string       `json:"next"`
	Index uint64        `json:"index"`
}

// List is a page of the held keys under prefix after the key after ("":
// from the first), at most limit of them (0: the node's default).
func (c *Client) List(ctx context.Context, prefix, after string, limit int) (*Page, error) {
	q := url.Values{}
	if prefix != "" {
		q.Set("prefix", prefix)
	}
	if after != "" {
		q.Set("after", after)
	}
	if limit > 0 {
		q.Set("limit", fmt.Sprint(limit))
	}
	path := "/v1/locks"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var p Page
	if err := c.do(ctx, call{method: "GET", path: path, idempotent: true}, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// Status is part of a node's status (`GET /v1/status`, docs/api.md).
type Status struct {
	ID           uint64  `json:"id"`
	Role         string  `json:"role"`
	Leader       *uint64 `json:"leader"`
	Term         uint64  `json:"term"`
	CommitIndex  uint64  `json:"commit_index"`
	AppliedIndex uint64  `json:"applied_index"`
	LocksHeld    uint64  `json:"locks_held"`
	ModuleHash   string  `json:"module_hash"`
}

// Status is the status of the node that answers (the first endpoint that
// does).
func (c *Client) Status(ctx context.Context) (*Status, error) {
	var s Status
	if err := c.do(ctx, call{method: "GET", path: "/v1/status", idempotent: true}, &s); err != nil {
		return nil, err
	}
	return &s, nil
}
