package nomadtest

import (
	"strings"
	"testing"
	"time"
)

func TestDeadlineStretchesWithSlowness(t *testing.T) {
	cases := []struct {
		name     string
		slowness []float64 // one value per Passed call; the last repeats
		elapsed  time.Duration
		passed   bool
		says     string
	}{
		{"no slowness: the plain timeout", nil, 150 * time.Millisecond, true, "100ms"},
		{"idle machine: not yet", []float64{1}, 50 * time.Millisecond, false, "100ms"},
		{"below 1 counts as 1", []float64{0.2}, 150 * time.Millisecond, true, "100ms"},
		{"3x slower: still waiting past the timeout", []float64{3}, 150 * time.Millisecond, false, "x3.0"},
		{"3x slower: passed past 3 timeouts", []float64{3}, 350 * time.Millisecond, true, "x3.0"},
		{"the worst seen counts, not the last", []float64{1, 4, 1}, 350 * time.Millisecond, false, "x4.0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var slow func() float64
			if tc.slowness != nil {
				i := 0
				slow = func() float64 {
					v := tc.slowness[min(i, len(tc.slowness)-1)]
					i++
					return v
				}
			}
			d := NewDeadline(100*time.Millisecond, slow)
			for range tc.slowness {
				d.Passed()
			}
			d.start = time.Now().Add(-tc.elapsed) // instead of sleeping
			if got := d.Passed(); got != tc.passed {
				t.Errorf("Passed() = %v after %s, want %v (%s)", got, tc.elapsed, tc.passed, d)
			}
			if !strings.Contains(d.String(), tc.says) {
				t.Errorf("String() = %q, want it to contain %q", d, tc.says)
			}
		})
	}
}
