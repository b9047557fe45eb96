package devstack

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// process is a child the stack started and must stop.
type process struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed once reaped; err is set before
	err  error
}

// spawn starts a child in its own process group, so that a Ctrl-C at the
// terminal reaches devstack alone and the children are stopped in order,
// with its output prefixed by name. Pdeathsig kills the child if devstack
// itself is killed, so no child outlives it.
func (s *stack) spawn(name, bin string, env []string, args ...string) (*process, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	w := s.out.writer(name)
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &process{name: name, cmd: cmd, done: make(chan struct{})}
	s.procs = append(s.procs, p)
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// stop sends SIGTERM to the process group and SIGKILL after grace.
func (p *process) stop(grace time.Duration) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// prefixer interleaves the output of many processes line by line, each line
// led by the name of the process it came from.
type prefixer struct {
	mu  sync.Mutex
	out io.Writer
}

func newPrefixer(out io.Writer) *prefixer { return &prefixer{out: out} }

// writer returns the writer for one process's output.
func (p *prefixer) writer(name string) io.Writer {
	return &linePrefixer{p: p, prefix: []byte(fmt.Sprintf("%-10s| ", name))}
}

type linePrefixer struct {
	p       *prefixer
	prefix  []byte
	mu      sync.Mutex
	partial []byte
}

func (l *linePrefixer) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, b...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		l.p.mu.Lock()
		_, err := l.p.out.Write(append(append([]byte{}, l.prefix...), l.partial[:i+1]...))
		l.p.mu.Unlock()
		if err != nil && !errors.Is(err, io.ErrClosedPipe) {
			return 0, err
		}
		l.partial = l.partial[i+1:]
	}
	return len(b), nil
}
