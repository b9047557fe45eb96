package servicetest

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/txfence/txfence/testinfra/logtest"
)

// Killed is a service process a test expects to die by SIGKILL: its own
// fault injection kills it, or the test does (Kill). Unlike StartProcess,
// starting it does not wait for it to listen: it may be dead before it
// does. If it is still alive when the test ends, it is killed then.
type Killed struct {
	cmd    *exec.Cmd
	out    *logtest.Buffer
	exited chan struct{} // closed once err is set
	err    error
}

// StartKilled starts bin with the environment plus env, in a process group
// of its own.
func StartKilled(t testing.TB, bin string, env map[string]string) *Killed {
	t.Helper()
	cmd := exec.Command(bin)
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	p := &Killed{cmd: cmd, out: &logtest.Buffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.Kill() // a no-op once it is dead
		<-p.exited
	})
	return p
}

// Kill sends SIGKILL to the process and its group, as kill -9 would.
func (p *Killed) Kill() { _ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL) }

// Done is closed when the process has ended; Err then says how.
func (p *Killed) Done() <-chan struct{} { return p.exited }

// Err is how the process ended, once Done is closed.
func (p *Killed) Err() error {
	<-p.exited
	return p.err
}

// Output is what the process wrote to stdout and stderr so far.
func (p *Killed) Output() string { return p.out.String() }

// WaitKilled waits for the process to end, and fails t unless SIGKILL
// ended it.
func (p *Killed) WaitKilled(t testing.TB, within time.Duration) {
	t.Helper()
	name := p.cmd.Path
	select {
	case <-p.exited:
	case <-time.After(within):
		t.Fatalf("%s did not die within %s\n%s", name, within, p.Output())
	}
	var exit *exec.ExitError
	if !errors.As(p.err, &exit) {
		t.Fatalf("%s exited with %v, want killed by SIGKILL\n%s", name, p.err, p.Output())
	}
	if ws, ok := exit.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("%s ended with %v, want killed by SIGKILL\n%s", name, p.err, p.Output())
	}
}
