package lockd

import (
	"errors"
	"fmt"
)

// Code is a stable error code a node answers with (docs/api.md, "Error
// codes"). New codes are only ever added; a client meeting one it does not
// know falls back on the HTTP status.
type Code string

// The codes a lock client meets most; Error.Code carries any code.
const (
	CodeBadRequest       Code = "bad_request"
	CodeInvalidKey       Code = "invalid_key"
	CodeInvalidLease     Code = "invalid_lease"
	CodeInvalidWait      Code = "invalid_wait"
	CodeInvalidLimit     Code = "invalid_limit"
	CodeFieldTooLong     Code = "field_too_long"
	CodeUnauthenticated  Code = "unauthenticated"
	CodeForbidden        Code = "forbidden"
	CodeHeld             Code = "held"
	CodeNotHeld          Code = "not_held"
	CodeWrongToken       Code = "wrong_token"
	CodeNotHolder        Code = "not_holder"
	CodeRefused          Code = "refused"
	CodeQuota            Code = "quota"
	CodeCapacity         Code = "capacity"
	CodeUnsupported      Code = "unsupported"
	CodeTooManyWaiters   Code = "too_many_waiters"
	CodeOverloaded       Code = "overloaded"
	CodeNotLeader        Code = "not_leader"
	CodeUnavailable      Code = "unavailable"
	CodeTimeout          Code = "timeout"
	CodeInternal         Code = "internal"
	CodeShuttingDown     Code = "shutting_down"
	CodeNoSession        Code = "no_session"
	CodeInvalidTTL       Code = "invalid_ttl"
	CodeNotSessionHolder Code = "not_session_holder"
	CodeModuleFailed     Code = "module_failed"
	CodeRevoked          Code = "revoked"
	CodeCompacted        Code = "compacted"
)

// Error is an error a node answered: its HTTP status, its stable code and
// its message. errors.Is(err, ErrHeld) and the like match it by code.
type Error struct {
	Status  int
	Code    Code
	Message string
	// Leader is the node the answering node named as leader, if any.
	Leader *uint64
	// Endpoint is the node that answered.
	Endpoint string
}

// Error is the node's message with its status, code and endpoint.
func (e *Error) Error() string {
	return fmt.Sprintf("lockd: %s (%d %s) from %s", e.Message, e.Status, e.Code, e.Endpoint)
}

// Is matches the sentinel errors by code (and ErrUnavailable by status).
func (e *Error) Is(target error) bool {
	var s *sentinel
	if !errors.As(target, &s) {
		return false
	}
	for _, c := range s.codes {
		if c == e.Code {
			return true
		}
	}
	return s.status != 0 && s.status == e.Status && !knownCode(e.Code)
}

// sentinel is an error value errors.Is compares an *Error with.
type sentinel struct {
	name   string
	codes  []Code
	status int // a code this client does not know falls back on it
}

func (s *sentinel) Error() string { return "lockd: " + s.name }

// Sentinels for errors.Is. Each matches an *Error by its code.
var (
	ErrBadRequest = &sentinel{"bad request", []Code{CodeBadRequest, CodeInvalidKey, CodeInvalidLease,
		CodeInvalidWait, CodeInvalidLimit, CodeFieldTooLong, CodeInvalidTTL}, 400}
	ErrUnauthenticated = &sentinel{"unauthenticated", []Code{CodeUnauthenticated}, 401}
	ErrForbidden       = &sentinel{"forbidden", []Code{CodeForbidden, CodeNotHolder, CodeRefused,
		CodeNotSessionHolder, CodeRevoked}, 403}
	ErrHeld        = &sentinel{"held", []Code{CodeHeld}, 0}
	ErrNotHeld     = &sentinel{"not held", []Code{CodeNotHeld}, 0}
	ErrWrongToken  = &sentinel{"wrong token", []Code{CodeWrongToken}, 0}
	ErrNoSession   = &sentinel{"no such session", []Code{CodeNoSession}, 0}
	ErrUnsupported = &sentinel{"unsupported", []Code{CodeUnsupported}, 422}
	ErrTooMany     = &sentinel{"too many requests", []Code{CodeTooManyWaiters, CodeOverloaded, CodeQuota}, 429}
	ErrCapacity    = &sentinel{"capacity reached", []Code{CodeCapacity}, 507}
	ErrUnavailable = &sentinel{"unavailable", []Code{CodeNotLeader, CodeUnavailable, CodeShuttingDown,
		CodeTimeout}, 503}
	// ErrUnknown: the request may or may not have taken effect (its answer
	// was lost, or a node answered 503 after it may have reached the
	// leader).
	ErrUnknown = errors.New("lockd: outcome unknown")
	// ErrLockLost: a held lock's lease may have ended (Lock.Err wraps it).
	ErrLockLost = errors.New("lockd: the lock's lease may have ended")
)

// knownCode reports whether this client knows code.
func knownCode(c Code) bool {
	for _, s := range []*sentinel{ErrBadRequest, ErrUnauthenticated, ErrForbidden, ErrHeld, ErrNotHeld,
		ErrWrongToken, ErrNoSession, ErrUnsupported, ErrTooMany, ErrCapacity, ErrUnavailable} {
		for _, k := range s.codes {
			if k == c {
				return true
			}
		}
	}
	return false
}

// wrapped is an error that errors.Is matches with one sentinel (is) and
// whose cause errors.As finds through Unwrap: an unknown outcome, a lost
// lease.
type wrapped struct {
	is    error
	what  string
	cause error
}

func (e *wrapped) Error() string { return fmt.Sprintf("%s: %v", e.what, e.cause) }

// Unwrap gives the cause (errors.As finds an *Error in it).
func (e *wrapped) Unwrap() error { return e.cause }

// Is makes errors.Is(err, e.is) true.
func (e *wrapped) Is(target error) bool { return target == e.is }

// unknown: the outcome of the request named what is unknown, for cause.
func unknown(what string, cause error) error {
	return &wrapped{is: ErrUnknown, what: "lockd: " + what + ": outcome unknown", cause: cause}
}
