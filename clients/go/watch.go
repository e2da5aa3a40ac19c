package lockd

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// watchSilence: a watch stream that sends nothing this long is given up
// (a node sends progress every 5 s on a quiet prefix).
const watchSilence = 15 * time.Second

// Change is one change to a key as a watcher sees it (docs/watch.md).
type Change struct {
	// Type is "granted", "released", "expired" or "value".
	Type  string  `json:"type"`
	Key   string  `json:"key"`
	Token *uint64 `json:"token"`
	// The holding's, on "granted".
	LeaseMS   *uint64 `json:"lease_ms"`
	Mode      *string `json:"mode"`
	Limit     *uint32 `json:"limit"`
	Owner     *string `json:"owner"`
	Principal *string `json:"principal"`
	// Value is a "value" change's value.
	Value *string `json:"value"`
}

// Event is every change of one log entry under the watched prefix.
type Event struct {
	Index   uint64   `json:"index"`
	Changes []Change `json:"changes"`
}

// WatchCut ends a watch that resuming cannot mend: Code is "compacted"
// (list the prefix and watch from the list's index + 1), "watch_behind"
// or "revoked"; ResumeFrom the index to start again from.
type WatchCut struct {
	Code       Code
	Message    string
	ResumeFrom uint64
}

// Error says what cut the watch and where to resume.
func (e *WatchCut) Error() string {
	return fmt.Sprintf("lockd: watch cut (%s): %s; resume from %d", e.Code, e.Message, e.ResumeFrom)
}

// Watch follows the changes under prefix from log index from (0: from the
// next entry applied) as a channel of events, in log order, each entry
// once. When its node goes away it resumes on the next endpoint from the
// index after the last event delivered, for up to the client's retry
// budget without an answer. The channel closes when ctx is done or the
// watch ends; the error channel then carries why (nil for ctx): a
// *WatchCut for a cut that resuming cannot mend, or an *Error (code
// compacted, 410: list the prefix, then watch from the list's index + 1).
func (c *Client) Watch(ctx context.Context, prefix string, from uint64) (<-chan Event, <-chan error) {
	events := make(chan Event)
	done := make(chan error, 1)
	go func() {
		defer close(events)
		done <- c.watch(ctx, prefix, from, events)
	}()
	return events, done
}

func (c *Client) watch(ctx context.Context, prefix string, from uint64, events chan<- Event) error {
	quiet := time.Now() // since the last answer from any node
	for attempt := 0; ; attempt++ {
		ep := c.endpoint(attempt)
		next, answered, err := c.stream(ctx, ep, prefix, from, events)
		if ctx.Err() != nil {
			return nil
		}
		if next > from {
			from = next
		}
		if answered {
			quiet = time.Now()
			c.answered(attempt)
		}
		switch err.(type) {
		case *WatchCut:
			return err
		case *Error:
			if e := err.(*Error); !(e.Status == 503 || e.Status == 504) {
				return e
			}
		}
		if time.Since(quiet) > c.retryFor {
			return fmt.Errorf("lockd: watch %q: no node answered for %v: %w", prefix, c.retryFor, err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stream reads one watch stream from ep: the index to resume from,
// whether the node answered, and why the stream ended.
func (c *Client) stream(ctx context.Context, ep, prefix string, from uint64, events chan<- Event) (uint64, bool, error) {
	q := url.Values{}
	if prefix != "" {
		q.Set("prefix", prefix)
	}
	if from > 0 {
		q.Set("from", strconv.FormatUint(from, 10))
	}
	// A node that stops answering (paused, cut off) sends nothing, not
	// even the progress message due every 5 s: give it up after three.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	silent := time.AfterFunc(watchSilence, cancel)
	defer silent.Stop()
	req, err := http.NewRequestWithContext(ctx, "GET", ep+"/v1/watch?"+q.Encode(), nil)
	if err != nil {
		return from, false, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return from, false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		var b [4096]byte
		n, _ := resp.Body.Read(b[:])
		return from, true, answerError(resp.StatusCode, b[:n], ep)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), MaxAnswerBytes)
	var event, data string
	for sc.Scan() {
		silent.Reset(watchSilence)
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event:"):
			event = strings.TrimSpace(line[len("event:"):])
		case strings.HasPrefix(line, "data:"):
			data += strings.TrimPrefix(line[len("data:"):], " ")
			if len(data) > MaxAnswerBytes {
				return from, true, fmt.Errorf("a watch message over %d bytes from %s", MaxAnswerBytes, ep)
			}
		case line == "":
			next, err := c.dispatch(ctx, event, data, from, events)
			if err != nil {
				return next, true, err
			}
			from, event, data = next, "", ""
		}
	}
	if err := sc.Err(); err != nil {
		return from, true, err
	}
	return from, true, fmt.Errorf("the stream from %s ended", ep)
}

// dispatch handles one message: the index to resume from after it.
func (c *Client) dispatch(ctx context.Context, event, data string, from uint64, events chan<- Event) (uint64, error) {
	switch event {
	case "changes":
		var e Event
		if err := json.Unmarshal([]byte(data), &e); err != nil {
			return from, fmt.Errorf("lockd: a bad watch message: %w", err)
		}
		if e.Index < from {
			return from, nil // already delivered (a resume never repeats)
		}
		select {
		case events <- e:
		case <-ctx.Done():
			return from, ctx.Err()
		}
		return e.Index + 1, nil
	case "progress":
		var p struct {
			Index uint64 `json:"index"`
		}
		if json.Unmarshal([]byte(data), &p) == nil && p.Index+1 > from {
			return p.Index + 1, nil
		}
		return from, nil
	case "cut":
		var cut struct {
			Code       Code   `json:"code"`
			Error      string `json:"error"`
			ResumeFrom uint64 `json:"resume_from"`
		}
		if err := json.Unmarshal([]byte(data), &cut); err != nil {
			return from, fmt.Errorf("lockd: a bad cut message: %w", err)
		}
		if cut.Code == CodeShuttingDown {
			// Another node goes on from the same index.
			return from, &Error{Status: 503, Code: cut.Code, Message: cut.Error}
		}
		return from, &WatchCut{Code: cut.Code, Message: cut.Error, ResumeFrom: cut.ResumeFrom}
	}
	return from, nil
}
