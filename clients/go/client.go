package lockd

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// MaxAnswerBytes bounds the body of an answer this client reads.
const MaxAnswerBytes = 4 << 20

// Client is a connection to a lockd cluster. It is safe for concurrent
// use; Close it when done.
type Client struct {
	endpoints      []string
	http           *http.Client
	token          string
	owner          string
	retryFor       time.Duration
	requestTimeout time.Duration
	tls            bool

	mu   sync.Mutex
	next int // the endpoint tried first: the last that answered
}

// Option configures a Client.
type Option func(*Client) error

// WithToken authenticates every request with a bearer token.
func WithToken(token string) Option {
	return func(c *Client) error {
		if strings.ContainsAny(token, "\r\n") {
			return errors.New("lockd: a token must not contain a line break")
		}
		c.token = token
		return nil
	}
}

// WithTLS speaks HTTPS with cfg (its RootCAs for the cluster's CA, its
// Certificates for a client certificate). Endpoints given without a
// scheme become https://.
func WithTLS(cfg *tls.Config) Option {
	return func(c *Client) error {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.TLSClientConfig = cfg.Clone()
		c.http = &http.Client{Transport: t}
		c.tls = true
		return nil
	}
}

// WithOwner names this client's holdings (default: "go-" and 32 random
// hex digits). An acquire's retry is recognised by its owner and request
// id, so two clients must not share an owner by accident.
func WithOwner(owner string) Option {
	return func(c *Client) error {
		if owner == "" {
			return errors.New("lockd: an owner must not be empty")
		}
		c.owner = owner
		return nil
	}
}

// WithRequestTimeout bounds one request to one node (default 5 s), beyond
// the time an acquire asks to wait.
func WithRequestTimeout(d time.Duration) Option {
	return func(c *Client) error {
		if d <= 0 {
			return errors.New("lockd: a request timeout must be positive")
		}
		c.requestTimeout = d
		return nil
	}
}

// WithRetryFor is how long a call keeps trying other nodes through a
// leader change or a dead node (default 10 s).
func WithRetryFor(d time.Duration) Option {
	return func(c *Client) error {
		if d < 0 {
			return errors.New("lockd: a retry budget must not be negative")
		}
		c.retryFor = d
		return nil
	}
}

// New returns a client of the nodes at endpoints ("host:port" or a URL).
func New(endpoints []string, opts ...Option) (*Client, error) {
	c := &Client{
		http:           &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()},
		owner:          "go-" + randomID(),
		retryFor:       10 * time.Second,
		requestTimeout: 5 * time.Second,
	}
	for _, o := range opts {
		if err := o(c); err != nil {
			return nil, err
		}
	}
	if len(endpoints) == 0 {
		return nil, errors.New("lockd: no endpoints given")
	}
	scheme := "http"
	if c.tls {
		scheme = "https"
	}
	for _, e := range endpoints {
		if !strings.Contains(e, "://") {
			e = scheme + "://" + e
		}
		u, err := url.Parse(e)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return nil, fmt.Errorf("lockd: bad endpoint %q: want host:port or an http(s) URL", e)
		}
		c.endpoints = append(c.endpoints, u.Scheme+"://"+u.Host)
	}
	return c, nil
}

// Owner is the name this client's holdings carry.
func (c *Client) Owner() string { return c.owner }

// Close ends the client's idle connections.
func (c *Client) Close() error {
	c.http.CloseIdleConnections()
	return nil
}

// call is one request to the cluster.
type call struct {
	method, path string
	body         any
	// idempotent: safe to send again after its answer was lost.
	idempotent bool
	// wait: how long the node may take beyond the request timeout (an
	// acquire's wait).
	wait time.Duration
	// raw: a body sent as it is, of type contentType (body is then nil).
	raw         []byte
	contentType string
	// sink: a 2xx answer's body is copied here, unbounded (a snapshot),
	// instead of decoded.
	sink io.Writer
}

// do sends cl to the nodes until one answers, decoding a 2xx answer's
// JSON into out (if not nil).
func (c *Client) do(ctx context.Context, cl call, out any) error {
	payload := cl.raw
	if cl.body != nil {
		b, err := json.Marshal(cl.body)
		if err != nil {
			return fmt.Errorf("lockd: %s %s: %w", cl.method, cl.path, err)
		}
		payload = b
	}
	giveUp := time.Now().Add(c.retryFor)
	var last error
	for attempt := 0; ; attempt++ {
		ep := c.endpoint(attempt)
		status, body, sent, err := c.once(ctx, ep, cl, payload)
		switch {
		case err != nil && ctx.Err() != nil:
			if sent && !cl.idempotent {
				return unknown(cl.method+" "+cl.path, ctx.Err())
			}
			return ctx.Err()
		case err != nil:
			if sent && !cl.idempotent {
				return unknown(cl.method+" "+cl.path, err)
			}
			last = err
		case status >= 200 && status < 300:
			c.answered(attempt)
			if out == nil {
				return nil
			}
			if err := json.Unmarshal(body, out); err != nil {
				return fmt.Errorf("lockd: %s %s: a bad answer from %s: %w", cl.method, cl.path, ep, err)
			}
			return nil
		default:
			e := answerError(status, body, ep)
			busy := e.Status == 503 || e.Status == 504
			retry := e.Code == CodeNotLeader || (busy && cl.idempotent)
			if !retry {
				if busy {
					// It may have reached the leader before this answer.
					return unknown(cl.method+" "+cl.path, e)
				}
				return e
			}
			last = e
		}
		if !time.Now().Before(giveUp) {
			return fmt.Errorf("lockd: %s %s: no node answered for %v: %w", cl.method, cl.path, c.retryFor, last)
		}
		pause := time.Duration(attempt+1) * 10 * time.Millisecond
		if pause > 200*time.Millisecond {
			pause = 200 * time.Millisecond
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pause):
		}
	}
}

// endpoint is the one to try at attempt.
func (c *Client) endpoint(attempt int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.endpoints[(c.next+attempt)%len(c.endpoints)]
}

// answered: the endpoint of attempt answered; start there next time.
func (c *Client) answered(attempt int) {
	c.mu.Lock()
	c.next = (c.next + attempt) % len(c.endpoints)
	c.mu.Unlock()
}

// once sends one request to ep: the answer's status and body, and
// whether the request may have reached the node (false only when no
// connection was made).
func (c *Client) once(ctx context.Context, ep string, cl call, payload []byte) (int, []byte, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, c.requestTimeout+cl.wait)
	defer cancel()
	var body io.Reader
	if payload != nil {
		body = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, cl.method, ep+cl.path, body)
	if err != nil {
		return 0, nil, false, err
	}
	switch {
	case cl.contentType != "":
		req.Header.Set("Content-Type", cl.contentType)
	case payload != nil:
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, !notConnected(err), err
	}
	defer resp.Body.Close()
	if cl.sink != nil && resp.StatusCode >= 200 && resp.StatusCode < 300 {
		if _, err := io.Copy(cl.sink, resp.Body); err != nil {
			return 0, nil, true, err
		}
		return resp.StatusCode, nil, true, nil
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxAnswerBytes+1))
	if err != nil {
		return 0, nil, true, err
	}
	if len(b) > MaxAnswerBytes {
		return 0, nil, true, fmt.Errorf("an answer over %d bytes from %s", MaxAnswerBytes, ep)
	}
	return resp.StatusCode, b, true, nil
}

// notConnected: err came before any connection to the node was made, so
// the request never left.
func notConnected(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// answerError reads an error answer's body (docs/api.md, ErrorBody).
func answerError(status int, body []byte, ep string) *Error {
	var b struct {
		Code   Code    `json:"code"`
		Error  string  `json:"error"`
		Leader *uint64 `json:"leader"`
	}
	e := &Error{Status: status, Endpoint: ep}
	if json.Unmarshal(body, &b) == nil && b.Code != "" {
		e.Code, e.Message, e.Leader = b.Code, b.Error, b.Leader
	} else {
		e.Message = strings.TrimSpace(string(body))
		if len(e.Message) > 200 {
			e.Message = e.Message[:200]
		}
		if e.Message == "" {
			e.Message = http.StatusText(status)
		}
	}
	return e
}

// keyPath is the route of key's action (a key may contain '/': each
// segment is escaped, the slashes kept).
func keyPath(key, action string) string {
	segs := strings.Split(key, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	p := "/v1/locks/" + strings.Join(segs, "/")
	if action != "" {
		p += "/" + action
	}
	return p
}

// randomID is 128 random bits as hex, as the other clients' request ids.
func randomID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("lockd: no randomness: " + err.Error())
	}
	return hex.EncodeToString(b[:])
}
