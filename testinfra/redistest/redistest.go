// Package redistest finds a real Redis for tests: TEST_REDIS_URL, else a
// server on 127.0.0.1:6379, else a throwaway redis-server on a free port
// (stopped when the test ends). Like pgtest, it fails under CI or make test
// when none can be had, and skips otherwise.
package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/txfence/txfence/testinfra/pgcluster"
	"github.com/txfence/txfence/testinfra/pgtest"
)

const localURL = "redis://127.0.0.1:6379/0"

// URL returns the URL of a reachable Redis. Tests that share a server
// must use keys of their own (prefix them with t.Name()).
func URL(t testing.TB) string {
	t.Helper()
	if u := os.Getenv("TEST_REDIS_URL"); u != "" {
		if err := Ping(u); err != nil {
			pgtest.Unavailable(t, "Redis at TEST_REDIS_URL", err)
		}
		return u
	}
	localErr := Ping(localURL)
	if localErr == nil {
		return localURL
	}
	u, err := Start(t)
	if err != nil {
		pgtest.Unavailable(t, "Redis", fmt.Errorf("none on 127.0.0.1:6379 (%v), and a throwaway server failed: %w", localErr, err))
	}
	return u
}

// Start runs a throwaway redis-server on a free loopback port, keeping
// nothing on disk, and stops it when t ends. Tests that stop Redis on
// purpose use their own.
func Start(t testing.TB) (string, error) {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return "", errors.New("no redis-server binary on PATH; install the redis-server package")
	}
	port, err := pgcluster.FreePort()
	if err != nil {
		return "", err
	}
	cmd := exec.Command(bin, "--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--save", "", "--appendonly", "no", "--dir", t.TempDir())
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return "", err
	}
	u := fmt.Sprintf("redis://127.0.0.1:%d/0", port)
	servers.Store(u, cmd)
	t.Cleanup(func() { Stop(t, u) })
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err = Ping(u); err == nil {
			return u, nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("redis-server on port %d did not answer: %w", port, err)
		}
		time.Sleep(20 * time.Millisecond) // polling a child process that has no readiness signal
	}
}

// servers maps the URL of each throwaway server to its process.
var servers sync.Map

// Stop kills the throwaway server at u, as a test that takes Redis away
// does. Stopping twice is harmless.
func Stop(t testing.TB, u string) {
	t.Helper()
	v, ok := servers.LoadAndDelete(u)
	if !ok {
		return
	}
	cmd := v.(*exec.Cmd)
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
}

// Ping sends PING to the server at u and expects PONG.
func Ping(u string) error {
	parsed, err := url.Parse(u)
	if err != nil {
		return err
	}
	conn, err := net.DialTimeout("tcp", parsed.Host, 2*time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return fmt.Errorf("unexpected answer to PING: %q", strings.TrimSpace(line))
	}
	return nil
}
