// Command xferprobe measures what a transfer's bytes pass through besides
// zfs: copies, AES-GCM and ChaCha20-Poly1305, TLS 1.3 on loopback, and the
// framings a transfer could put over it (HTTP/1.1, HTTP/2 with the
// transfer's settings and with others), each for the same number of bytes
// and moved as the transfer moves them: read from a pipe-like source in
// pieces of at most 64 KiB (what a read of zfs send's stdout returns)
// through a 256 KiB buffer, read at the other end through a 256 KiB buffer.
// It explains the transfer's throughput against a local pipe, and chose its
// framing (docs/performance.md).
//
// With -rounds N it runs every probe N times, interleaved (round 1 of
// each, then round 2 of each...), and ends with a table of the medians:
// MiB/s, the ratio to TLS alone in the same round, and the CPU seconds of
// this process (both ends) per GiB. On a machine shared with other work
// the absolute figures move from round to round; the same-round ratios
// and the CPU cost move much less.
//
// usage: xferprobe [-rounds N] [-only name,name] [-cpuprofile file] MIB
package main

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/crypto/chacha20poly1305"
)

// probeFunc moves n bytes once.
type probeFunc func(ctx context.Context, n int64) error

type probe struct {
	name string
	run  probeFunc
}

func main() {
	rounds := flag.Int("rounds", 1, "run every probe this many times, interleaved, and print the medians")
	only := flag.String("only", "", "comma-separated probe names to run (default all)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the run to this file")
	flag.Parse()
	mib, err := strconv.Atoi(flag.Arg(0))
	if err != nil || flag.NArg() != 1 || *rounds < 1 {
		fmt.Fprintln(os.Stderr, "usage: xferprobe [-rounds N] [-only name,name] [-cpuprofile file] MIB")
		os.Exit(2)
	}
	n := int64(mib) << 20
	probes := slices.Concat(basics(), framings(selfSigned()))
	if *only != "" {
		want := strings.Split(*only, ",")
		probes = slices.DeleteFunc(probes, func(p probe) bool { return !slices.Contains(want, p.name) })
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	ctx := context.Background()
	results := map[string][]result{}
	for round := 1; round <= *rounds; round++ {
		for _, p := range probes {
			r, err := measure(ctx, p, n)
			if err != nil {
				fmt.Printf("probe %s error=%v\n", p.name, err)
				continue
			}
			r.round = round
			results[p.name] = append(results[p.name], r)
			fmt.Printf("probe %s bytes=%d seconds=%.3f mib_s=%.1f cpu_s_per_gib=%.2f round=%d\n",
				p.name, n, r.wall.Seconds(), r.mibs(n), r.cpuPerGiB(n), round)
		}
	}
	if *rounds > 1 {
		summary(probes, results, n)
	}
}

// basics are what every byte costs whatever the framing.
func basics() []probe {
	key := make([]byte, 32)
	block, _ := aes.NewCipher(key)
	gcm, _ := cipher.NewGCM(block)
	cc, _ := chacha20poly1305.New(key)
	return []probe{
		{"memcopy", func(_ context.Context, n int64) error {
			_, err := io.CopyBuffer(sink{}, source(n), make([]byte, 256<<10))
			return err
		}},
		{"pipe", func(_ context.Context, n int64) error {
			r, w, err := os.Pipe()
			if err != nil {
				return err
			}
			go func() { _, _ = io.CopyBuffer(w, io.LimitReader(zero{}, n), make([]byte, 256<<10)); w.Close() }()
			_, err = io.CopyBuffer(sink{}, r, make([]byte, 256<<10))
			r.Close()
			return err
		}},
		{"aes-gcm-seal", func(_ context.Context, n int64) error { return seal(gcm, n) }},
		{"chacha20-seal", func(_ context.Context, n int64) error { return seal(cc, n) }},
	}
}

type result struct {
	round int
	wall  time.Duration
	cpu   time.Duration // user and system time of this process
}

func (r result) mibs(n int64) float64 { return float64(n) / (1 << 20) / r.wall.Seconds() }
func (r result) cpuPerGiB(n int64) float64 {
	return r.cpu.Seconds() / (float64(n) / (1 << 30))
}

func measure(ctx context.Context, p probe, n int64) (result, error) {
	c0 := cpuTime()
	start := time.Now()
	err := p.run(ctx, n)
	return result{wall: time.Since(start), cpu: cpuTime() - c0}, err
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// summary prints, for each probe, the median MiB/s, the median of its
// ratio to tls13-loopback in the same round, and the median CPU cost.
func summary(probes []probe, results map[string][]result, n int64) {
	tls := map[int]result{}
	for _, r := range results["tls13-loopback"] {
		tls[r.round] = r
	}
	fmt.Printf("\n| probe | rounds | MiB/s (median) | × TLS, same round (median) | CPU s per GiB, both ends (median) |\n|---|---|---|---|---|\n")
	for _, p := range probes {
		rs := results[p.name]
		if len(rs) == 0 {
			continue
		}
		var speed, ratio, cpu []float64
		for _, r := range rs {
			speed = append(speed, r.mibs(n))
			cpu = append(cpu, r.cpuPerGiB(n))
			if t, ok := tls[r.round]; ok {
				ratio = append(ratio, r.mibs(n)/t.mibs(n))
			}
		}
		rt := "-"
		if len(ratio) > 0 {
			rt = fmt.Sprintf("%.2f", median(ratio))
		}
		fmt.Printf("| %s | %d | %.0f | %s | %.2f |\n", p.name, len(rs), median(speed), rt, median(cpu))
	}
}

func median(v []float64) float64 {
	sort.Float64s(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

type zero struct{}

func (zero) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// pipeRead is what one read of zfs send's stdout returns at most: a
// Linux pipe's default capacity.
const pipeRead = 64 << 10

// source is n bytes read as from zfs send's stdout.
func source(n int64) io.Reader { return sourceOf(n, pipeRead) }

// sourceOf is n bytes read in pieces of at most chunk (0: pipeRead), as
// from a pipe of that capacity.
func sourceOf(n int64, chunk int) io.Reader {
	if chunk <= 0 {
		chunk = pipeRead
	}
	return io.LimitReader(pipeLike(chunk), n)
}

type pipeLike int

func (c pipeLike) Read(p []byte) (int, error) {
	p = p[:min(len(p), int(c))]
	clear(p)
	return len(p), nil
}

func seal(a cipher.AEAD, n int64) error {
	buf := make([]byte, 16<<10)
	out := make([]byte, 0, len(buf)+a.Overhead())
	nonce := make([]byte, a.NonceSize())
	for done := int64(0); done < n; done += int64(len(buf)) {
		out = a.Seal(out[:0], nonce, buf, nil)
	}
	return nil
}

// sink discards what it is given, as zfs receive's stdin takes it: in the
// writes of the copy's buffer. (io.Discard would read the body itself, in
// 8 KiB pieces, through its ReadFrom.)
type sink struct{}

func (sink) Write(p []byte) (int, error) { return len(p), nil }
