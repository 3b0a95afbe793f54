package metrics

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/nomad-device-zfs/nomad-device-zfs/allocwatch"
	"github.com/nomad-device-zfs/nomad-device-zfs/hooks"
	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/transfer"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// Label names. Nomad's own for an allocation, so that a query can join a
// slot's series with the client's allocation metrics on alloc_id.
const (
	labelPool      = "pool"
	labelClass     = "class"
	labelSlot      = "slot"
	labelAllocID   = "alloc_id"
	labelNamespace = "namespace"
	labelJob       = "job"
	labelTaskGroup = "task_group"
	labelState     = "state"
	labelHealth    = "health"
	labelPolicy    = "policy"
	labelOutcome   = "outcome"
	labelResult    = "result"
	labelCommand   = "command"
	labelSubcmd    = "subcommand"
	labelReason    = "reason"
	labelVersion   = "version"
	labelKind      = "kind"
)

// resultOK is the result label of everything that worked.
const resultOK = "ok"

// Buckets, in seconds. A release in the emulated test guest takes about a
// second and on a host with ZFS in its kernel a few hundred milliseconds;
// the steps around 1 s are fine enough to read a median against a 1 s
// target. A zfs command takes milliseconds to minutes (zfs_timeout).
var (
	releaseBuckets = []float64{0.1, 0.25, 0.5, 0.75, 1, 1.25, 1.5, 2, 3, 5, 10, 30, 60, 300}
	reserveBuckets = []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
	commandBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 120}
	scanBuckets    = []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
)

// Metrics is the plugin's registry and the instruments the Manager, the
// watcher, Reserve and the zfs runner report to. A nil *Metrics (the
// endpoint is off) takes every report and does nothing.
type Metrics struct {
	reg *prometheus.Registry
	cfg *model.Config
	// state reads the slots' state at scrape time; nil until Watch.
	state *stateCollector
	// afterScrape runs once a scrape's answer is sent (AfterScrape).
	afterScrape func()

	releases        *prometheus.CounterVec
	releaseLatency  *prometheus.HistogramVec
	releaseDuration *prometheus.HistogramVec
	reserves        *prometheus.HistogramVec
	commands        *prometheus.HistogramVec
	scans           *prometheus.HistogramVec
	watchErrors     *prometheus.CounterVec
	indexResets     prometheus.Counter
	sent, received  *prometheus.CounterVec
}

var (
	_ hooks.Observer      = (*Metrics)(nil)
	_ allocwatch.Observer = (*Metrics)(nil)
	_ transfer.Observer   = (*Metrics)(nil)
)

// New builds the registry for cfg's slots, with the Go runtime's and the
// process's own metrics (go_*, process_*) and the build's version. The
// slots' state joins it with Watch.
func New(cfg *model.Config, version string) *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		cfg: cfg,
		releases: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nomad_device_zfs_releases_total",
			Help: "Slot releases, by how the holder ended (outcome), what was done (policy) and the result: ok, or why it failed (retried).",
		}, []string{labelPool, labelClass, labelPolicy, labelOutcome, labelResult}),
		releaseLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "nomad_device_zfs_release_latency_seconds",
			Help:    "From the holder's end on this node (its last task finished) to its slot ready again, for releases that succeeded.",
			Buckets: releaseBuckets,
		}, []string{labelPool, labelClass, labelPolicy}),
		releaseDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "nomad_device_zfs_release_duration_seconds",
			Help:    "The plugin's own part of a release that succeeded: its zfs commands, from the release's start to the slot ready.",
			Buckets: releaseBuckets,
		}, []string{labelPool, labelClass, labelPolicy}),
		reserves: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "nomad_device_zfs_reserve_duration_seconds",
			Help:    "Time of Reserve, the task start's call, by result: ok, unknown_slot, not_ready, refused, error.",
			Buckets: reserveBuckets,
		}, []string{labelPool, labelClass, labelResult}),
		commands: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "nomad_device_zfs_command_duration_seconds",
			Help:    "zfs and zpool commands the plugin ran, by subcommand and result: ok, or the kind of failure.",
			Buckets: commandBuckets,
		}, []string{labelPool, labelCommand, labelSubcmd, labelResult}),
		scans: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "nomad_device_zfs_scan_duration_seconds",
			Help:    "Scans of each parent (its zfs list -r, and the zpool list all parents share), by pool and result.",
			Buckets: scanBuckets,
		}, []string{labelPool, labelResult}),
		watchErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nomad_device_zfs_watcher_errors_total",
			Help: "Failed blocking queries of this node's allocations, by reason; the watcher retries with backoff, and no slot is released meanwhile.",
		}, []string{labelReason}),
		indexResets: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nomad_device_zfs_watcher_index_resets_total",
			Help: "Times the Nomad index went backwards (a restored or rebuilt cluster) and the watcher started over.",
		}),
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nomad_device_zfs_transfer_sent_bytes_total",
			Help: "Stream bytes this node's transfer server wrote to peers (zfs send's output, before HTTP/2 and TLS), by kind: replica, migration.",
		}, []string{labelKind}),
		received: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nomad_device_zfs_transfer_received_bytes_total",
			Help: "Stream bytes this node's transfer client read from peers into zfs receive, by kind: replica, migration.",
		}, []string{labelKind}),
	}
	for _, k := range transfer.ObservedKinds {
		// Both kinds from the start: a rate over the first transfer.
		m.sent.WithLabelValues(k)
		m.received.WithLabelValues(k)
	}
	build := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "nomad_device_zfs_build_info",
		Help:        "The plugin's version; always 1.",
		ConstLabels: prometheus.Labels{labelVersion: version},
	})
	build.Set(1)
	m.reg.MustRegister(m.releases, m.releaseLatency, m.releaseDuration, m.reserves, m.commands, m.scans,
		m.watchErrors, m.indexResets, m.sent, m.received, build,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// ViewSource publishes the slots' View: hooks.Manager.
type ViewSource interface {
	View() (*model.View, <-chan struct{})
}

// Watch adds the slots' state, read from views and snaps (the watcher's
// latest snapshot, nil before the first) on every scrape. Call it once.
func (m *Metrics) Watch(views ViewSource, snaps func() *model.Snapshot) {
	if m == nil {
		return
	}
	m.state = &stateCollector{views: views, snaps: snaps}
	m.reg.MustRegister(m.state)
}

// AfterScrape makes f run once each scrape's answer is sent: the plugin
// binary returns the scrape's garbage to the system with it (as after a
// scan, plugin.CollectAfterScans). A scrape of 10,000 held slots builds
// 15 MB that nothing needs once it is sent, and Go would otherwise keep
// the pages until well after the next one. Call it before Serve.
func (m *Metrics) AfterScrape(f func()) { m.afterScrape = f }

// Handler serves the registry and the held slots' series in Prometheus's
// text format, and counts its own scrapes
// (promhttp_metric_handler_requests_total).
func (m *Metrics) Handler(logger hclog.Logger) http.Handler {
	var g prometheus.Gatherer = m.reg
	if m.state != nil {
		g = withSlots{reg: m.reg, state: m.state}
	}
	h := promhttp.InstrumentMetricHandler(m.reg, promhttp.HandlerFor(g, promhttp.HandlerOpts{
		ErrorLog:            logAdapter{logger},
		ErrorHandling:       promhttp.ContinueOnError,
		MaxRequestsInFlight: 4,
		Timeout:             30 * time.Second,
	}))
	if m.afterScrape == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
		if f, ok := w.(http.Flusher); ok {
			f.Flush() // the answer is out before the collection
		}
		m.afterScrape()
	})
}

// ReleaseDone counts a release, and times one that succeeded. The latency
// runs from the holder's end as its client recorded it (the node's own
// clock), so it includes Nomad's part: the client's report, the servers'
// answer to the watcher. It is left out when that end is unknown (a lost
// allocation whose tasks never finished here), for an operator's release
// (its holder may have ended long before) and for an orphan, which is not
// made ready again.
func (m *Metrics) ReleaseDone(ev hooks.ReleaseEvent) {
	if m == nil {
		return
	}
	pool, class, policy := zfs.PoolOf(ev.Slot.Dataset), ev.Slot.Class, policyLabel(ev.Policy)
	m.releases.WithLabelValues(pool, class, policy, outcomeLabel(ev.Outcome), releaseResult(ev)).Inc()
	if ev.Err != nil {
		return
	}
	m.releaseDuration.WithLabelValues(pool, class, policy).Observe(ev.Done.Sub(ev.Started).Seconds())
	end := ev.Holder.FinishedAt
	if end.IsZero() || ev.Outcome == model.OutcomeOperator || ev.Slot.Orphan {
		return
	}
	m.releaseLatency.WithLabelValues(pool, class, policy).Observe(max(ev.Done.Sub(end), 0).Seconds())
}

// ScanDone times a scan.
func (m *Metrics) ScanDone(ev hooks.ScanEvent) {
	if m == nil {
		return
	}
	m.scans.WithLabelValues(ev.Pool, errResult(ev.Err)).Observe(ev.Took.Seconds())
}

// ReserveDone times a Reserve of ids. Nomad reserves one device group's
// instances per call, so the first ID names the class; an ID the
// configuration does not have is counted under class "".
func (m *Metrics) ReserveDone(ids []string, took time.Duration, err error) {
	if m == nil {
		return
	}
	class, pool := "", ""
	if len(ids) > 0 {
		if c, ok := m.cfg.ClassOf(ids[0]); ok {
			class, pool = c, zfs.PoolOf(m.cfg.ClassDataset(c))
		}
	}
	m.reserves.WithLabelValues(pool, class, reserveResult(err)).Observe(took.Seconds())
}

// QueryFailed counts a failed blocking query of the watcher.
func (m *Metrics) QueryFailed(reason string) {
	if m == nil {
		return
	}
	m.watchErrors.WithLabelValues(reason).Inc()
}

// IndexReset counts the watcher starting over from index 0.
func (m *Metrics) IndexReset() {
	if m == nil {
		return
	}
	m.indexResets.Inc()
}

// Sent counts n bytes of a stream of kind that the transfer server wrote
// to a peer (transfer.Observer).
func (m *Metrics) Sent(kind string, n int) {
	if m == nil {
		return
	}
	m.sent.WithLabelValues(kind).Add(float64(n))
}

// Received counts n bytes of a stream of kind that the transfer client
// read from a peer (transfer.Observer).
func (m *Metrics) Received(kind string, n int) {
	if m == nil {
		return
	}
	m.received.WithLabelValues(kind).Add(float64(n))
}

// policyLabel is a release's policy label: "none" when it was refused
// before one was chosen.
func policyLabel(p string) string {
	switch p {
	case string(model.PolicyDestroy), string(model.PolicyRollback), string(model.PolicySnapshot), hooks.PolicyPark:
		return p
	case "":
		return "none"
	}
	return "other"
}

func outcomeLabel(o string) string {
	switch o {
	case model.OutcomeComplete, model.OutcomeFailed, model.OutcomeLost, model.OutcomeGone,
		model.OutcomeOperator, model.OutcomeRetired:
		return o
	}
	return "other"
}

// releaseResult is ok, the kind of the zfs failure, or "refused": the
// release stopped before it chose a policy, without a zfs error
// (something below the slot is not the plugin's; nothing was changed).
func releaseResult(ev hooks.ReleaseEvent) string {
	r := errResult(ev.Err)
	if r == "error" && ev.Policy == "" {
		return "refused"
	}
	return r
}

// reserveResult names Reserve's outcome by the Manager's error kinds.
func reserveResult(err error) string {
	switch {
	case err == nil:
		return resultOK
	case errors.Is(err, hooks.ErrUnknownSlot):
		return "unknown_slot"
	case errors.Is(err, hooks.ErrNotReady):
		return "not_ready"
	case errors.Is(err, hooks.ErrRefused):
		return "refused"
	}
	return "error"
}

// errResult is ok, the kind of a zfs failure (zfsKinds), "canceled", or
// "error" for anything else.
func errResult(err error) string {
	if err == nil {
		return resultOK
	}
	for _, k := range zfsKinds {
		if errors.Is(err, k.kind) {
			return k.name
		}
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return "canceled"
	}
	return "error"
}

// zfsKinds are the zfs package's error kinds as result labels.
var zfsKinds = []struct {
	kind error
	name string
}{
	{zfs.ErrBusy, "busy"}, {zfs.ErrNotExist, "not_exist"}, {zfs.ErrExists, "exists"},
	{zfs.ErrPermission, "permission"}, {zfs.ErrHasChildren, "has_children"},
	{zfs.ErrHasClones, "has_clones"}, {zfs.ErrNewerSnapshots, "newer_snapshots"},
	{zfs.ErrNoParent, "no_parent"}, {zfs.ErrInvalid, "invalid"}, {zfs.ErrNoSpace, "no_space"},
	{zfs.ErrTimeout, "timeout"}, {zfs.ErrMounted, "mounted"}, {zfs.ErrNotFound, "not_found"},
}

// logAdapter hands promhttp's errors (a collector that failed, a client
// that went away) to hclog.
type logAdapter struct{ logger hclog.Logger }

func (l logAdapter) Println(v ...any) { l.logger.Warn("metrics endpoint: " + fmt.Sprint(v...)) }
