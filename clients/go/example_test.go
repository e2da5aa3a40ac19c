package lockd_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"lockd"
)

// A node's refusal is an *lockd.Error: match it by its stable code.
func ExampleError() {
	var err error = &lockd.Error{Status: 409, Code: lockd.CodeHeld, Message: `lock "jobs/a" is held`}
	fmt.Println(errors.Is(err, lockd.ErrHeld), errors.Is(err, lockd.ErrNotHeld))
	var e *lockd.Error
	if errors.As(err, &e) {
		fmt.Println(e.Status, e.Code)
	}
	// Output:
	// true false
	// 409 held
}

// Bad input is refused before anything is sent.
func ExampleNew() {
	_, err := lockd.New([]string{"ftp://127.0.0.1:7401"})
	fmt.Println(err)
	c, _ := lockd.New([]string{"127.0.0.1:7401"})
	_, err = c.TryLock(context.Background(), "jobs/a", 0)
	fmt.Println(err)
	// Output:
	// lockd: bad endpoint "ftp://127.0.0.1:7401": want host:port or an http(s) URL
	// lockd: lock "jobs/a": a lease must be at least 1 ms, not 0s
}

// Hold a lock while a job runs, and stop as soon as it may be lost.
func ExampleClient_Lock() {
	ctx := context.Background()
	c, err := lockd.New([]string{"127.0.0.1:7401", "127.0.0.1:7402", "127.0.0.1:7403"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	l, err := c.Lock(ctx, "jobs/nightly", 10*time.Second, lockd.Wait(30*time.Second))
	if errors.Is(err, lockd.ErrHeld) {
		return // someone else runs it
	} else if err != nil {
		log.Fatal(err)
	}
	defer l.Release(ctx)
	job := make(chan error, 1)
	go func() { job <- runJob(ctx, l.Token) }() // the token goes with every write
	select {
	case err := <-job:
		fmt.Println("done:", err)
	case <-l.Lost():
		fmt.Println("stop: the lock may be lost:", l.Err())
	}
}

// client-go's leader election: lead while the lease holds.
func ExampleClient_RunLeaderElection() {
	c, err := lockd.New([]string{"127.0.0.1:7401"})
	if err != nil {
		log.Fatal(err)
	}
	c.RunLeaderElection(context.Background(), lockd.LeaderElectionConfig{
		Key: "controllers/reconciler", Identity: "pod-a", Lease: 5 * time.Second,
		OnStartedLeading: func(ctx context.Context) { reconcile(ctx) },
		OnStoppedLeading: func() { log.Print("no longer leading") },
		OnNewLeader:      func(id string) { log.Printf("leader: %q", id) },
	})
}

func runJob(context.Context, uint64) error { return nil }
func reconcile(ctx context.Context)        { <-ctx.Done() }
