// Package lockd is a Go client of lockd, the Raft-replicated lock service,
// over its HTTP/JSON API (docs/api.md). It uses Go's standard library only.
//
// A Client talks to any node of a cluster: a follower passes a lock
// request on to the leader, and the client moves to the next endpoint when
// a node cannot answer. Every call takes a context.Context.
//
// A held lock (Lock) carries its fencing token and a local deadline
// counted from before the acquire was sent, so the deadline never outlasts
// the lease the leader keeps. A goroutine renews the lease while the lock
// is held; Lost is closed, with Err saying why, as soon as the lease may
// have ended (a renewal refused, or none acknowledged before the local
// deadline). Pass the token to whatever the lock protects: a holder whose
// lease ended while it was paused still believes it holds the lock, and
// only the resource's check of the token stops its late write.
//
// Errors: every error a node answers is an *Error carrying the stable code
// of docs/api.md ("Error codes"); match it with errors.Is against the
// sentinels (ErrHeld, ErrNotHeld, ...) or errors.As for the details. An
// error that wraps ErrUnknown means the request may or may not have taken
// effect (a release whose answer was lost, say); acquires carry a request
// id, so an acquire is retried safely rather than left unknown.
package lockd
