// Package pgcluster runs a private PostgreSQL cluster from the machine's
// PostgreSQL binaries, for tests and for the local stack when no server is
// reachable. It is never used in production.
package pgcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Cluster is a running PostgreSQL server owned by this process or a
// previous run of it.
type Cluster struct {
	Dir  string // data directory; the socket lives here too
	Port int
	bin  string
	cred *syscall.Credential // set when running as root: PostgreSQL refuses root
}

// URL is a superuser connection URL to the cluster's postgres database.
func (c *Cluster) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.Port)
}

// BinDir finds the directory holding initdb and pg_ctl: on PATH, else the
// newest /usr/lib/postgresql/<version>/bin (where Debian puts them).
func BinDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		// Resolve links (some images link initdb alone into /usr/local/bin)
		// to reach the directory that holds pg_ctl and pg_dump too.
		if real, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Dir(real), nil
		}
		return filepath.Dir(p), nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int { return versionOf(b) - versionOf(a) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", errors.New("no PostgreSQL server binaries (initdb, pg_ctl) on PATH or in /usr/lib/postgresql/*/bin; install the postgresql package")
}

func versionOf(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

// Start runs a cluster in dir on port, creating it with initdb when dir
// holds none. A cluster already running from dir is reused. Durability
// settings are relaxed (fsync off): this is for tests and development.
func Start(ctx context.Context, dir string, port int) (*Cluster, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	dir, err = filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dir: dir, Port: port, bin: bin}
	if os.Geteuid() == 0 {
		if c.cred, err = postgresCredential(); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if err := c.chown(dir); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, "PG_VERSION")); errors.Is(err, os.ErrNotExist) {
		if out, err := c.run(ctx, "initdb", "-D", dir, "-U", "postgres", "--auth=trust", "--encoding=UTF8", "--no-sync"); err != nil {
			return nil, fmt.Errorf("initdb: %w: %s", err, out)
		}
	}
	if _, err := c.run(ctx, "pg_ctl", "status", "-D", dir); err == nil {
		return c.withRunningPort()
	}
	opts := strings.Join([]string{
		"-p", strconv.Itoa(port),
		"-k", dir,
		"-c", "listen_addresses=127.0.0.1",
		"-c", "fsync=off",
		"-c", "synchronous_commit=off",
		"-c", "full_page_writes=off",
		"-c", "max_connections=300",
	}, " ")
	logFile := filepath.Join(dir, "server.log")
	if out, err := c.run(ctx, "pg_ctl", "start", "-D", dir, "-w", "-t", "60", "-l", logFile, "-o", opts); err != nil {
		tail, _ := os.ReadFile(logFile)
		if len(tail) > 2000 {
			tail = tail[len(tail)-2000:]
		}
		return nil, fmt.Errorf("start PostgreSQL in %s on port %d: %w: %s\n%s", dir, port, err, out, tail)
	}
	return c, nil
}

// withRunningPort reads the port of a cluster that was already running.
func (c *Cluster) withRunningPort() (*Cluster, error) {
	pid, err := os.ReadFile(filepath.Join(c.Dir, "postmaster.pid"))
	if err != nil {
		return nil, err
	}
	lines := strings.Split(string(pid), "\n")
	if len(lines) < 4 {
		return nil, errors.New("unreadable postmaster.pid")
	}
	port, err := strconv.Atoi(strings.TrimSpace(lines[3]))
	if err != nil {
		return nil, fmt.Errorf("postmaster.pid port: %w", err)
	}
	c.Port = port
	return c, nil
}

// Stop shuts the cluster down quickly (open sessions are ended).
func (c *Cluster) Stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if out, err := c.run(ctx, "pg_ctl", "stop", "-D", c.Dir, "-m", "fast", "-w"); err != nil {
		return fmt.Errorf("stop PostgreSQL: %w: %s", err, out)
	}
	return nil
}

func (c *Cluster) run(ctx context.Context, tool string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, tool), args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.Dir = c.Dir
	// Own process group: a Ctrl-C at the terminal reaches the launcher,
	// which stops the cluster in order, not the server directly.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: c.cred}
	err := cmd.Run()
	return out.Bytes(), err
}

func (c *Cluster) chown(dir string) error {
	if c.cred == nil {
		return nil
	}
	return os.Chown(dir, int(c.cred.Uid), int(c.cred.Gid))
}

// postgresCredential finds an unprivileged user to run the server as when
// this process is root: postgres where the package created it, else nobody.
func postgresCredential() (*syscall.Credential, error) {
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
	}
	return nil, errors.New("running as root, and neither a postgres nor a nobody user exists to run PostgreSQL as")
}

// FreePort returns a free loopback TCP port for a server a test starts.
// Another process may still bind it first; callers retry on a failed start.
func FreePort() (int, error) { return FreePorts(1) }

// FreePorts returns the first of n consecutive free loopback TCP ports.
// They lie below the kernel's ephemeral range: a port in that range can be
// handed to any process's outgoing connection or :0 listener between this
// check and the bind, which on a busy test machine happens; below it only
// an explicit bind can take one.
func FreePorts(n int) (int, error) {
	lowest := 32768
	if raw, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(raw)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil {
				lowest = v
			}
		}
	}
	const from = 10000
	if n < 1 || lowest-n <= from {
		return 0, fmt.Errorf("no room for %d ports between %d and the ephemeral range at %d", n, from, lowest)
	}
	for range 200 {
		base := from + rand.IntN(lowest-n-from)
		free := true
		for p := base; p < base+n && free; p++ {
			ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
			if err != nil {
				free = false
				break
			}
			ln.Close()
		}
		if free {
			return base, nil
		}
	}
	return 0, fmt.Errorf("no %d consecutive free ports below %d", n, lowest)
}
