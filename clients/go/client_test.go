package lockd

// Unit tests of the client's own rules against a stub node (httptest):
// how answers map to errors, what is retried and what is left unknown,
// and when a held lock is lost. The tests against real clusters are in
// cluster_test.go, recipes_test.go and secure_test.go.

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// stub answers each request with answer(path, body) (status, JSON).
func stub(t *testing.T, answer func(path string, body map[string]any) (int, string)) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		status, out := answer(r.URL.EscapedPath(), body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(out))
	}))
	t.Cleanup(s.Close)
	return s
}

func client(t *testing.T, endpoints ...string) *Client {
	t.Helper()
	c, err := New(endpoints, WithRetryFor(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestAnswersMapToErrorsByTheirCode(t *testing.T) {
	held := answerError(409, []byte(`{"code":"held","error":"lock \"a\" is held"}`), "n1")
	if !errors.Is(held, ErrHeld) || errors.Is(held, ErrNotHeld) {
		t.Fatalf("held matched wrongly: %v", held)
	}
	var e *Error
	if !errors.As(error(held), &e) || e.Code != CodeHeld || e.Status != 409 {
		t.Fatalf("want an *Error with code held, got %#v", held)
	}
	// A code this client does not know falls back on the status.
	novel := answerError(503, []byte(`{"code":"some_new_code","error":"x"}`), "n1")
	if !errors.Is(novel, ErrUnavailable) {
		t.Fatalf("an unknown 503 code should match ErrUnavailable: %v", novel)
	}
	// A known code never matches another sentinel through its status.
	if errors.Is(answerError(400, []byte(`{"code":"invalid_key","error":"x"}`), "n1"), ErrHeld) {
		t.Fatal("invalid_key matched ErrHeld")
	}
	// A body that is not an ErrorBody still gives an error with the status.
	plain := answerError(502, []byte("bad gateway"), "n1")
	if plain.Status != 502 || plain.Message != "bad gateway" {
		t.Fatalf("got %#v", plain)
	}
}

func TestAnAcquireIsRetriedWithItsRequestID(t *testing.T) {
	var mu sync.Mutex
	var seen []map[string]any
	s := stub(t, func(path string, body map[string]any) (int, string) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case strings.HasSuffix(path, "/acquire"):
			seen = append(seen, body)
			if len(seen) == 1 {
				return 503, `{"code":"unavailable","error":"leadership changing"}`
			}
			return 200, `{"token":7,"lease_ms":60000,"count":1}`
		case strings.HasSuffix(path, "/release"):
			return 200, `{"count":0}`
		}
		return 404, `{"code":"not_found","error":"no route"}`
	})
	c := client(t, s.URL)
	l, err := c.TryLock(context.Background(), "jobs/a b", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.Background())
	if l.Token != 7 {
		t.Fatalf("token %d", l.Token)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 || seen[0]["request_id"] == "" || seen[0]["request_id"] != seen[1]["request_id"] ||
		seen[0]["owner"] != c.Owner() || seen[1]["owner"] != c.Owner() {
		t.Fatalf("want two tries with one request id and the owner, got %v", seen)
	}
	if seen[0]["wait_ms"] != float64(0) || seen[0]["lease_ms"] != float64(60000) {
		t.Fatalf("want wait 0 and the lease, got %v", seen[0])
	}
}

func TestAReleaseWhoseAnswerIsAmbiguousIsUnknown(t *testing.T) {
	var releases atomic.Int64
	s := stub(t, func(path string, _ map[string]any) (int, string) {
		switch {
		case strings.HasSuffix(path, "/acquire"):
			return 200, `{"token":3,"lease_ms":60000,"count":1}`
		case strings.HasSuffix(path, "/release"):
			releases.Add(1)
			return 503, `{"code":"unavailable","error":"leadership changed while the request was being committed"}`
		}
		return 404, `{"code":"not_found","error":"no route"}`
	})
	c := client(t, s.URL)
	l, err := c.TryLock(context.Background(), "k", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	err = l.Release(context.Background())
	var e *Error
	if !errors.Is(err, ErrUnknown) || !errors.As(err, &e) || e.Code != CodeUnavailable {
		t.Fatalf("want unknown wrapping the 503, got %v", err)
	}
	if n := releases.Load(); n != 1 {
		t.Fatalf("a release must not be sent twice, was sent %d times", n)
	}
}

func TestNotLeaderIsSentToTheNextNode(t *testing.T) {
	follower := stub(t, func(string, map[string]any) (int, string) {
		return 503, `{"code":"not_leader","error":"node 1 does not lead","leader":2}`
	})
	leader := stub(t, func(path string, _ map[string]any) (int, string) {
		if strings.HasSuffix(path, "/release") {
			return 200, `{"count":0}`
		}
		return 404, `{"code":"not_found","error":"no route"}`
	})
	c := client(t, follower.URL, leader.URL)
	l := &Lock{c: c, Key: "k", Token: 9}
	if err := l.Release(context.Background()); err != nil {
		t.Fatalf("not_leader is refused before anything is proposed: %v", err)
	}
}

func TestALockIsLostWhenItsRenewalIsRefused(t *testing.T) {
	s := stub(t, func(path string, _ map[string]any) (int, string) {
		switch {
		case strings.HasSuffix(path, "/acquire"):
			return 200, `{"token":5,"lease_ms":150,"count":1}`
		case strings.HasSuffix(path, "/keepalive"):
			return 404, `{"code":"not_held","error":"lock \"k\" is not held"}`
		}
		return 404, `{"code":"not_found","error":"no route"}`
	})
	c := client(t, s.URL)
	l, err := c.TryLock(context.Background(), "k", 150*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Lost():
	case <-time.After(10 * time.Second):
		t.Fatal("Lost never closed")
	}
	if err := l.Err(); !errors.Is(err, ErrLockLost) || !errors.Is(err, ErrNotHeld) {
		t.Fatalf("want lost with not_held, got %v", err)
	}
}

func TestADeadlineCountsFromBeforeTheRequest(t *testing.T) {
	var mu sync.Mutex
	var arrived time.Time
	s := stub(t, func(path string, _ map[string]any) (int, string) {
		if strings.HasSuffix(path, "/acquire") {
			mu.Lock()
			arrived = time.Now()
			mu.Unlock()
			time.Sleep(50 * time.Millisecond) // the answer takes its time
			return 200, `{"token":1,"lease_ms":60000,"count":1}`
		}
		return 200, `{"count":0}`
	})
	c := client(t, s.URL)
	before := time.Now()
	l, err := c.TryLock(context.Background(), "k", 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.Background())
	// The module shortened the lease to 60 s: the deadline believes that,
	// counted from before the request reached the node (and so from
	// before the leader's lease began), not from the answer.
	d := l.Deadline()
	mu.Lock()
	defer mu.Unlock()
	if l.Lease != 60*time.Second || d.After(arrived.Add(60*time.Second)) || d.Before(before.Add(60*time.Second)) {
		t.Fatalf("deadline %v, lease %v: want between %v and %v", d, l.Lease, before.Add(60*time.Second), arrived.Add(60*time.Second))
	}
}

func TestBadInputIsRefusedBeforeItIsSent(t *testing.T) {
	if _, err := New(nil); err == nil {
		t.Fatal("no endpoints accepted")
	}
	if _, err := New([]string{"ftp://x:1"}); err == nil {
		t.Fatal("a non-HTTP endpoint accepted")
	}
	c := client(t, "127.0.0.1:1")
	if _, err := c.TryLock(context.Background(), "k", 0); err == nil {
		t.Fatal("a lease of 0 accepted")
	}
	if got := keyPath("a/b c/%", "acquire"); got != "/v1/locks/a/b%20c/%25/acquire" {
		t.Fatalf("key path %q", got)
	}
}

func TestAWatchReadsChangesAndEndsOnACutItCannotMend(t *testing.T) {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("prefix") != "jobs/" || r.URL.Query().Get("from") != "4" {
			w.WriteHeader(400)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("event: progress\nid: 5\ndata: {\"index\": 5}\n\n" +
			"event: changes\nid: 6\ndata: {\"index\": 6, \"changes\": [{\"type\": \"granted\", \"key\": \"jobs/a\", \"token\": 9}]}\n\n" +
			"event: cut\ndata: {\"code\": \"revoked\", \"error\": \"the token was revoked\", \"resume_from\": 7}\n\n"))
	}))
	defer s.Close()
	c := client(t, s.URL)
	events, done := c.Watch(context.Background(), "jobs/", 4)
	var got []Event
	for e := range events {
		got = append(got, e)
	}
	if len(got) != 1 || got[0].Index != 6 || got[0].Changes[0].Key != "jobs/a" || *got[0].Changes[0].Token != 9 {
		t.Fatalf("events %+v", got)
	}
	var cut *WatchCut
	if err := <-done; !errors.As(err, &cut) || cut.Code != CodeRevoked || cut.ResumeFrom != 7 {
		t.Fatalf("want a revoked cut resuming from 7, got %v", err)
	}
}
