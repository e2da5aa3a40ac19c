package lockd

import (
	"context"
	"errors"
	"io"
	"net/url"
	"strconv"
	"strings"
)

// The calls an operator scripts (as lockctl makes them). With
// authentication on they need the admin role.

// Member is a member of the cluster.
type Member struct {
	ID    uint64 `json:"id"`
	Addr  string `json:"addr"`
	Voter bool   `json:"voter"`
}

// Members are the cluster's members, as the answering node knows them.
func (c *Client) Members(ctx context.Context) ([]Member, error) {
	var m []Member
	if err := c.do(ctx, call{method: "GET", path: "/v1/members", idempotent: true}, &m); err != nil {
		return nil, err
	}
	return m, nil
}

// Healthy reports whether the node at endpoint ("host:port" or a URL)
// answers its health check (`GET /healthz`: the process serves).
func (c *Client) Healthy(ctx context.Context, endpoint string) error {
	base := endpoint
	if !strings.Contains(base, "://") {
		base = "http://" + base
		if c.tls {
			base = "https://" + endpoint
		}
	}
	status, body, _, err := c.once(ctx, base, call{method: "GET", path: "/healthz"}, nil)
	if err != nil {
		return err
	}
	if status != 200 {
		return answerError(status, body, base)
	}
	return nil
}

// SnapshotSave writes a backup from the leader to w (the file `lockd
// restore` takes). A backup is only whole when it returns nil.
func (c *Client) SnapshotSave(ctx context.Context, w io.Writer) error {
	if w == nil {
		return errors.New("lockd: no writer for the snapshot")
	}
	// Not retried: a retry after part of it was written would append.
	return c.do(ctx, call{method: "GET", path: "/v1/admin/snapshot", sink: w}, nil)
}

// UpgradeOptions are an upgrade's or a shadow's (docs/api.md).
type UpgradeOptions struct {
	// Replaces: refuse unless this module (64 hex digits) is the active one.
	Replaces string
	// Signature: the module's ed25519 signature, 128 hex digits.
	Signature string
	// NoPrecheck: propose without the leader's compile and dry run.
	NoPrecheck bool
	// Rollback lets in a module whatever its version.
	Rollback bool
}

// UpgradeReply is an upgrade's or a shadow's answer.
type UpgradeReply struct {
	Index      uint64  `json:"index"`
	ModuleHash string  `json:"module_hash"`
	Replaces   string  `json:"replaces"`
	Result     string  `json:"result"`
	Reason     *string `json:"reason"`
	Version    *string `json:"version"`
}

func (o UpgradeOptions) query() string {
	q := url.Values{}
	if o.Replaces != "" {
		q.Set("replaces", o.Replaces)
	}
	if o.Signature != "" {
		q.Set("signature", o.Signature)
	}
	if o.NoPrecheck {
		q.Set("precheck", "false")
	}
	if o.Rollback {
		q.Set("rollback", strconv.FormatBool(true))
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

// Upgrade replaces the lock module through the log with module (a
// component's bytes). An error wrapping ErrUnknown: it may have been
// proposed; status says which module is active.
func (c *Client) Upgrade(ctx context.Context, module []byte, o UpgradeOptions) (*UpgradeReply, error) {
	return c.admin(ctx, "/v1/admin/upgrade"+o.query(), module)
}

// Shadow runs module in shadow beside the active one (PromoteShadow to
// upgrade to it, AbortShadow to stop it).
func (c *Client) Shadow(ctx context.Context, module []byte, o UpgradeOptions) (*UpgradeReply, error) {
	return c.admin(ctx, "/v1/admin/shadow"+o.query(), module)
}

// PromoteShadow upgrades to the running shadow.
func (c *Client) PromoteShadow(ctx context.Context) (*UpgradeReply, error) {
	return c.admin(ctx, "/v1/admin/shadow/promote", nil)
}

// AbortShadow stops the shadow (an *Error with code no_shadow, 404, when
// none runs).
func (c *Client) AbortShadow(ctx context.Context) (*UpgradeReply, error) {
	return c.admin(ctx, "/v1/admin/shadow/abort", nil)
}

func (c *Client) admin(ctx context.Context, path string, module []byte) (*UpgradeReply, error) {
	cl := call{method: "POST", path: path}
	if module != nil {
		cl.raw, cl.contentType = module, "application/wasm"
	} else {
		cl.raw, cl.contentType = []byte("{}"), "application/json"
	}
	var r UpgradeReply
	if err := c.do(ctx, cl, &r); err != nil {
		return nil, err
	}
	return &r, nil
}
