package lockd

// The harness of the cluster tests: three `lockd serve` processes of the
// binary LOCKD_BIN names (scripts/test-go.sh sets it to the one the Rust
// tests ran). Without it the cluster tests are skipped, and the script
// fails on a skip.

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// cluster is three `lockd serve` processes on loopback.
type cluster struct {
	t     *testing.T
	bin   string
	dir   string
	addrs map[int]string
	procs map[int]*exec.Cmd
	// scheme and web: how the harness itself reads a node's status.
	scheme string
	web    *http.Client
	// args: each node's own extra flags (TLS, the auth file).
	args func(i int) []string
}

// startCluster starts three nodes and waits for a leader they agree on.
func startCluster(t *testing.T) *cluster {
	t.Helper()
	c := newCluster(t)
	c.start()
	return c
}

// newCluster: a cluster not started yet.
func newCluster(t *testing.T) *cluster {
	t.Helper()
	bin := os.Getenv("LOCKD_BIN")
	if bin == "" {
		t.Skip("LOCKD_BIN is not set: no lockd binary to run clusters of")
	}
	return &cluster{t: t, bin: bin, dir: t.TempDir(), addrs: map[int]string{}, procs: map[int]*exec.Cmd{},
		scheme: "http", web: &http.Client{Timeout: 2 * time.Second}, args: func(int) []string { return nil }}
}

// start starts three nodes and waits for a leader they agree on.
func (c *cluster) start() {
	t := c.t
	var initial []string
	for i := 1; i <= 3; i++ {
		c.addrs[i] = "127.0.0.1:" + freePort(t)
		initial = append(initial, fmt.Sprintf("%d=%s", i, c.addrs[i]))
	}
	for i := 1; i <= 3; i++ {
		c.spawn(i, strings.Join(initial, ","))
	}
	t.Cleanup(c.stop)
	c.waitLeader(0)
}

// freePort is a loopback port nobody listens on now.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}

func (c *cluster) spawn(i int, initial string) {
	log, err := os.Create(filepath.Join(c.dir, fmt.Sprintf("n%d.log", i)))
	if err != nil {
		c.t.Fatal(err)
	}
	defer log.Close()
	// The Raft timings of the other clients' cluster tests: a loaded
	// 2-core machine starts no spurious elections with them.
	cmd := exec.Command(c.bin, "serve", "--id", fmt.Sprint(i), "--addr", c.addrs[i],
		"--data-dir", filepath.Join(c.dir, fmt.Sprintf("n%d", i)), "--initial-cluster", initial,
		"--heartbeat-ms", "50", "--election-timeout-ms", "400")
	cmd.Args = append(cmd.Args, c.args(i)...)
	cmd.Stderr = log
	cmd.Env = append(os.Environ(), "RUST_LOG=info,openraft=warn")
	if cache := os.Getenv("LOCKD_MODULE_CACHE"); cache == "" {
		cmd.Env = append(cmd.Env, "LOCKD_MODULE_CACHE="+filepath.Join(filepath.Dir(c.bin), "test-module-cache"))
	}
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.procs[i] = cmd
}

// pause SIGSTOPs node i (kill still ends it).
func (c *cluster) pause(i int) {
	if p := c.procs[i]; p != nil {
		if err := p.Process.Signal(syscall.SIGSTOP); err != nil {
			c.t.Fatal(err)
		}
	}
}

// kill SIGKILLs node i.
func (c *cluster) kill(i int) {
	if p := c.procs[i]; p != nil {
		_ = p.Process.Kill()
		_ = p.Wait()
		delete(c.procs, i)
	}
}

func (c *cluster) stop() {
	for i := range c.procs {
		c.kill(i)
	}
}

func (c *cluster) endpoints() []string {
	var e []string
	for i := 1; i <= 3; i++ {
		e = append(e, c.addrs[i])
	}
	return e
}

// waitLeader is the leader every running node but without agrees on.
func (c *cluster) waitLeader(without int) int {
	c.t.Helper()
	end := time.Now().Add(30 * time.Second)
	for time.Now().Before(end) {
		seen := map[uint64]bool{}
		leads := 0
		for i := range c.procs {
			if i == without {
				continue
			}
			var st struct {
				Role   string  `json:"role"`
				Leader *uint64 `json:"leader"`
			}
			if getJSON(c.web, c.scheme+"://"+c.addrs[i]+"/v1/status", &st) != nil || st.Leader == nil {
				seen[0] = true
				continue
			}
			seen[*st.Leader] = true
			if st.Role == "leader" {
				leads = i
			}
		}
		if len(seen) == 1 && leads != 0 && seen[uint64(leads)] {
			return leads
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.t.Fatalf("no agreed leader within 30 s; logs in %s", c.dir)
	return 0
}

func getJSON(web *http.Client, url string, out any) error {
	resp, err := web.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// newClient is a client of endpoints, closed when the test ends.
func newClient(t *testing.T, endpoints []string, opts ...Option) *Client {
	t.Helper()
	c, err := New(endpoints, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}
