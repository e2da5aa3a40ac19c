package lockd

// A TLS cluster with authentication: tokens and certificates, the roles
// of the auth file, and a token revoked while its lock is held.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// secure is a TLS cluster's credentials.
type secure struct {
	dir    string
	auth   string
	tokens map[string]string
	hashes map[string]string
	roots  *x509.CertPool
}

// startSecureCluster starts a 3-node TLS cluster whose auth file gives
// the token principal "worker" the role "jobs" (keys under "jobs/").
func startSecureCluster(t *testing.T) (*cluster, *secure) {
	t.Helper()
	c := newCluster(t)
	s := &secure{dir: filepath.Join(c.dir, "certs"), tokens: map[string]string{}, hashes: map[string]string{}}
	args := []string{"certs", "init", s.dir, "--client", "admin"}
	for i := 1; i <= 3; i++ {
		args = append(args, "--node", fmt.Sprintf("%d=127.0.0.1", i))
	}
	run(t, c.bin, args...)
	for _, p := range []string{"worker"} {
		out, errOut := run(t, c.bin, "auth", "token", p)
		s.tokens[p] = strings.TrimSpace(out)
		h := regexp.MustCompile(`sha256:[0-9a-f]{64}`).FindString(errOut)
		if h == "" {
			t.Fatalf("no token hash in: %s", errOut)
		}
		s.hashes[p] = h
	}
	s.auth = filepath.Join(c.dir, "auth.toml")
	s.writeAuth(t, true)
	ca, err := os.ReadFile(filepath.Join(s.dir, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	s.roots = x509.NewCertPool()
	if !s.roots.AppendCertsFromPEM(ca) {
		t.Fatal("no CA certificate in ca.pem")
	}
	admin, err := tls.LoadX509KeyPair(filepath.Join(s.dir, "admin.pem"), filepath.Join(s.dir, "admin.key"))
	if err != nil {
		t.Fatal(err)
	}
	c.scheme = "https"
	c.web = &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: s.roots, Certificates: []tls.Certificate{admin}}}}
	c.args = func(i int) []string {
		return []string{"--tls-cert", filepath.Join(s.dir, fmt.Sprintf("node-%d.pem", i)),
			"--tls-key", filepath.Join(s.dir, fmt.Sprintf("node-%d.key", i)),
			"--tls-ca", filepath.Join(s.dir, "ca.pem"), "--auth-file", s.auth}
	}
	c.start()
	return c, s
}

// writeAuth writes the auth file, with the worker's token or without it.
func (s *secure) writeAuth(t *testing.T, worker bool) {
	t.Helper()
	tokens := ""
	if worker {
		tokens = fmt.Sprintf("tokens = [%q]", s.hashes["worker"])
	}
	text := fmt.Sprintf(`
[roles.jobs]
lock = ["jobs/"]

[principals.admin]
roles = ["admin"]

[principals.worker]
roles = ["jobs", "read"]
%s
`, tokens)
	if err := os.WriteFile(s.auth, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

func run(t *testing.T, bin string, args ...string) (string, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %v: %v\n%s", bin, args, err, errOut.String())
	}
	return out.String(), errOut.String()
}

func TestClusterTLSTokensRolesAndARevokedToken(t *testing.T) {
	c, s := startSecureCluster(t)
	ctx := context.Background()
	tlsCfg := &tls.Config{RootCAs: s.roots}
	worker := newClient(t, c.endpoints(), WithTLS(tlsCfg), WithToken(s.tokens["worker"]))
	l, err := worker.TryLock(ctx, "jobs/nightly", 900*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	// Outside its role's prefix: forbidden, with the code.
	var e *Error
	if _, err := worker.TryLock(ctx, "other/x", time.Second); !errors.Is(err, ErrForbidden) || !errors.As(err, &e) || e.Code != CodeForbidden {
		t.Fatalf("outside the role: want forbidden, got %v", err)
	}
	// A token the cluster does not know.
	stranger := newClient(t, c.endpoints(), WithTLS(tlsCfg), WithToken("not-a-token"))
	if _, err := stranger.TryLock(ctx, "jobs/x", time.Second); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("an unknown token: want unauthenticated, got %v", err)
	}
	// A watch open on the token, to be ended by the revocation.
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	events, done := worker.Watch(wctx, "jobs/", 0)
	go func() {
		for range events {
		}
	}()
	// Something for it to carry meanwhile (a grant of another key).
	if other, err := worker.TryLock(ctx, "jobs/other", time.Second); err != nil {
		t.Fatal(err)
	} else if err := other.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// Revoke the worker's token: the file without it, every node reloads.
	s.writeAuth(t, false)
	for i := 1; i <= 3; i++ {
		if err := c.procs[i].Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	// Its next request is refused, and its held lock is lost (a renewal
	// refused), not kept on a token that no longer works.
	end := time.Now().Add(15 * time.Second)
	for {
		_, err := worker.Holders(ctx, "jobs/nightly")
		if errors.Is(err, ErrUnauthenticated) {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("the revoked token still works after 15 s: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	select {
	case <-l.Lost():
	case <-time.After(15 * time.Second):
		t.Fatal("a lock held on a revoked token was never lost")
	}
	if !errors.Is(l.Err(), ErrLockLost) || !errors.Is(l.Err(), ErrUnauthenticated) {
		t.Fatalf("want lost because unauthenticated, got %v", l.Err())
	}
	// The open watch ends too: cut as revoked, or refused on resuming.
	select {
	case err := <-done:
		var cut *WatchCut
		var e *Error
		if !(errors.As(err, &cut) && cut.Code == CodeRevoked) && !(errors.As(err, &e) && e.Code == CodeUnauthenticated) {
			t.Fatalf("the watch on a revoked token ended with %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("a watch on a revoked token still runs after 15 s")
	}
}
