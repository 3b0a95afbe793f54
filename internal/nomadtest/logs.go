package nomadtest

import (
	"io"
	"os"
	"strings"
)

// Logs returns everything the agent (and, through it, its plugins) has
// logged so far, across restarts; each run starts with a "==== nomadtest"
// line.
func (a *Agent) Logs() string {
	b, err := os.ReadFile(a.logPath)
	if err != nil {
		return ""
	}
	return string(b)
}

// LogContains reports whether the agent log contains s.
func (a *Agent) LogContains(s string) bool { return strings.Contains(a.Logs(), s) }

// tail returns the last n lines of the agent log.
func (a *Agent) tail(n int) string { return tail(a.Logs(), n) }

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// runLog returns what the current run of the agent has logged.
func (a *Agent) runLog() string {
	a.mu.Lock()
	start := a.runStart
	a.mu.Unlock()
	f, err := os.Open(a.logPath)
	if err != nil {
		return ""
	}
	defer f.Close()
	b, err := io.ReadAll(io.NewSectionReader(f, start, 1<<40))
	if err != nil {
		return ""
	}
	return string(b)
}
