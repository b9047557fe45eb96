package servicetest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/txfence/txfence/shared/devswitch"
	"github.com/txfence/txfence/testinfra/logtest"
)

var builds sync.Map // package path and build flags -> *buildResult

type buildResult struct {
	once sync.Once
	path string
	err  error
}

// Build compiles the main package pkg (an import path) once per test
// binary, with the development and test switches (package devswitch), and
// returns the executable's path. Tests that need a service as a real
// process (to kill -9 or SIGSTOP it) start it with StartProcess.
func Build(t testing.TB, pkg string) string {
	t.Helper()
	return build(t, pkg, "-tags", devswitch.Tag)
}

// BuildRelease compiles pkg as a release is built: without the switches.
func BuildRelease(t testing.TB, pkg string) string {
	t.Helper()
	return build(t, pkg)
}

func build(t testing.TB, pkg string, flags ...string) string {
	t.Helper()
	v, _ := builds.LoadOrStore(pkg+" "+strings.Join(flags, " "), &buildResult{})
	b := v.(*buildResult)
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "txfence-build-")
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, filepath.Base(pkg))
		args := append(append([]string{"build"}, flags...), "-o", b.path, pkg)
		out, err := exec.Command("go", args...).CombinedOutput()
		if err != nil {
			b.err = fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// Process is a service running as a child process.
type Process struct {
	Service
	cmd *exec.Cmd
}

// StartProcess runs bin with args and env (added to this process's
// environment), in its own process group, killed if the test binary dies,
// and waits for its "listening" lines like Start. At cleanup it is sent
// SIGTERM and must exit 0 within 30 s, unless the test killed it.
func StartProcess(t testing.TB, bin string, args []string, env map[string]string, listeners ...string) *Process {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &Process{Service: Service{urls: map[string]string{}, done: make(chan error, 1), logs: &logtest.Buffer{}}, cmd: cmd}
	cmd.Stderr = p.logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	found := make(chan struct{})
	var foundOnce sync.Once
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			p.logs.Write(append(sc.Bytes(), '\n'))
			var line struct{ Msg, Listener, URL string }
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "listening" {
				p.mu.Lock()
				p.urls[line.Listener] = line.URL
				complete := true
				for _, l := range listeners {
					complete = complete && p.urls[l] != ""
				}
				p.mu.Unlock()
				if complete {
					foundOnce.Do(func() { close(found) })
				}
			}
		}
		p.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		select {
		case <-p.done: // already gone: the test killed it, or it died
			return
		default:
		}
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGCONT) // in case the test paused it
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case err := <-p.done:
			if err != nil && !strings.Contains(err.Error(), "killed") {
				t.Errorf("%s exited with %v at shutdown\n%s", filepath.Base(bin), err, p.Logs())
			}
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			t.Errorf("%s did not exit within 30s of SIGTERM", filepath.Base(bin))
		}
	})
	select {
	case <-found:
		return p
	case err := <-p.done:
		t.Fatalf("%s exited before listening: %v\n%s", filepath.Base(bin), err, p.Logs())
	case <-time.After(60 * time.Second):
		t.Fatalf("%s did not listen on %v within 60s\n%s", filepath.Base(bin), listeners, p.Logs())
	}
	return nil
}

// Signal sends sig to the process group: SIGKILL to crash it, SIGSTOP and
// SIGCONT to pause and resume it.
func (p *Process) Signal(sig syscall.Signal) error { return syscall.Kill(-p.cmd.Process.Pid, sig) }

// Wait waits for the process to exit, at most d.
func (p *Process) Wait(d time.Duration) error {
	select {
	case err := <-p.done:
		p.done <- err
		return err
	case <-time.After(d):
		return fmt.Errorf("still running after %s", d)
	}
}
