// Package reconcile is konglet's sync loop: on every coalesced change it
// translates a snapshot of the caches, loads the result into the local Kong
// and writes the statuses.
package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/konglet/konglet/proxy/admin"
	"github.com/konglet/konglet/proxy/declarative"
	"github.com/konglet/konglet/sync/snapshot"
	"github.com/konglet/konglet/sync/status"
	"github.com/konglet/konglet/sync/translate"
)

// Kong is the admin API of the local Kong.
type Kong interface {
	Info(ctx context.Context) (admin.Info, error)
	ConfigHash(ctx context.Context) (string, error)
	Load(ctx context.Context, document []byte) error
}

// Cache is the informer cache the loop reads.
type Cache interface {
	WaitForSync(ctx context.Context) bool
	Snapshot(controller string, kong snapshot.Kong, serviceUpstream bool) (*snapshot.Snapshot, error)
	Notify()
	Wait(ctx context.Context) error
}

// StatusWriter writes statuses; whether this replica leads is the writer's
// business.
type StatusWriter interface {
	Write(ctx context.Context, snap *snapshot.Snapshot, desired translate.Status) (status.Result, error)
}

// EventRecorder tells users, on their objects, what Kong refused.
type EventRecorder interface {
	// Refused tells whether it wrote the Event (only a leader writes).
	Refused(ctx context.Context, snap *snapshot.Snapshot, ref translate.ObjectRef, message string) (bool, error)
}

// PodReporter sets this replica's load condition on its own Pod.
type PodReporter interface {
	Report(ctx context.Context, current *corev1.Pod, want corev1.PodCondition) (bool, error)
}

// Options tune the loop.
type Options struct {
	ControllerName  string
	ServiceUpstream bool
	// KongPollInterval is how often Kong's configuration hash is checked, to
	// load again at once after Kong restarts.
	KongPollInterval time.Duration
	// MinBackoff and MaxBackoff bound the retry delay after a failure.
	MinBackoff, MaxBackoff time.Duration
	Budget                 Budget
}

// Loop is the sync loop. Create it with New.
type Loop struct {
	cache   Cache
	kong    Kong
	status  StatusWriter
	pods    PodReporter
	events  EventRecorder
	log     *slog.Logger
	metrics *Metrics
	opts    Options
	now     func() time.Time

	loadedHash atomic.Value // string: the hash Kong confirmed last
	loading    atomic.Value // string: the hash of a load in flight, "" if none
	// statuses holds the newest statuses to write (at most one: a newer
	// one replaces it), so that writing them never delays Kong's loads.
	statuses chan statusJob
	refusals refusals
	memo     translate.Memo // the previous translation's work, for the next
	failures int
	kongNode string // the node id of the Kong last seen
}

// New returns a loop. pods and events may be nil (nothing to report on).
func New(cache Cache, kong Kong, writer StatusWriter, pods PodReporter, events EventRecorder, log *slog.Logger, metrics *Metrics, opts Options) *Loop {
	if opts.KongPollInterval <= 0 {
		opts.KongPollInterval = time.Second
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = 100 * time.Millisecond
	}
	if opts.MaxBackoff < opts.MinBackoff {
		opts.MaxBackoff = 30 * time.Second
	}
	l := &Loop{cache: cache, kong: kong, status: writer, pods: pods, events: events, log: log, statuses: make(chan statusJob, 1), metrics: metrics, opts: opts, now: time.Now, refusals: refusals{}}
	l.loadedHash.Store("")
	l.loading.Store("")
	return l
}

// Ready tells whether Kong holds a configuration from this konglet: false
// until the first load, and again while a Kong that lost it (restarted)
// waits to be loaded.
func (l *Loop) Ready() bool { return l.loadedHash.Load().(string) != "" }

// Run syncs until ctx ends. Nothing is pushed before the caches have synced,
// so Kong never receives a configuration built from a partial view.
func (l *Loop) Run(ctx context.Context) error {
	if !l.cache.WaitForSync(ctx) {
		return nil // stopped before the caches synced: a clean stop too
	}
	l.log.Info("caches synced")
	go l.watchKong(ctx)
	go l.writeStatuses(ctx)
	l.cache.Notify()
	// retryAt is when a sync may run again after a failure: changes that
	// arrive before it wait for it, so Kong's Retry-After and the backoff
	// hold however busy the cluster is.
	var retryAt time.Time
	for {
		if err := l.cache.Wait(ctx); err != nil || !sleepUntil(ctx, retryAt) {
			return nil
		}
		err := l.Sync(ctx)
		if err == nil {
			l.failures, retryAt = 0, time.Time{}
			continue
		}
		if ctx.Err() != nil {
			return nil
		}
		delay := l.backoff(err)
		l.log.Warn("sync failed; retrying", "error", err.Error(), "retry_in", delay.String())
		retryAt = time.Now().Add(delay)
		time.AfterFunc(delay, l.cache.Notify)
	}
}

// sleepUntil waits for the moment t (false: ctx ended first).
func sleepUntil(ctx context.Context, t time.Time) bool {
	wait := time.Until(t)
	if wait <= 0 {
		return true
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

// statusJob is one translation's statuses and the snapshot they are for.
type statusJob struct {
	snap   *snapshot.Snapshot
	status translate.Status
}

// offerStatus queues the newest statuses, dropping older ones not written
// yet. Only the sync loop offers, so draining then sending cannot block.
func (l *Loop) offerStatus(job statusJob) {
	select {
	case <-l.statuses:
	default:
	}
	l.statuses <- job
}

// statusRetry is the delay before a sync that retries failed status writes.
const statusRetry = time.Second

// writeStatuses writes the newest statuses, one set at a time.
func (l *Loop) writeStatuses(ctx context.Context) {
	for {
		var job statusJob
		select {
		case <-ctx.Done():
			return
		case job = <-l.statuses:
		}
		if l.status == nil {
			continue
		}
		res, err := l.status.Write(ctx, job.snap, job.status)
		l.metrics.statusWrites.Add(float64(res.Writes))
		if err != nil && ctx.Err() == nil {
			l.metrics.statusFailures.Inc()
			l.log.Error("writing statuses; retrying", "error", err.Error(), "retry_in", statusRetry.String())
			time.AfterFunc(statusRetry, l.cache.Notify)
		}
	}
}

// backoff is capped exponential with jitter, or Kong's Retry-After.
func (l *Loop) backoff(err error) time.Duration {
	l.failures++
	var le *admin.LoadError
	if errors.As(err, &le) && le.RetryAfter > 0 {
		return le.RetryAfter
	}
	d := l.opts.MinBackoff << min(l.failures-1, 20)
	d = min(d, l.opts.MaxBackoff)
	return d/2 + rand.N(d/2+1)
}

// watchKong polls Kong's configuration hash: a Kong that restarted (zero
// hash) or holds another configuration gets ours again without waiting
// for a cluster change.
func (l *Loop) watchKong(ctx context.Context) {
	t := time.NewTicker(l.opts.KongPollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		want := l.loadedHash.Load().(string)
		if want == "" {
			continue
		}
		got, err := l.kong.ConfigHash(ctx)
		if err != nil {
			l.metrics.kongReachable.Set(0)
			continue
		}
		l.metrics.kongReachable.Set(1)
		// A load in flight changes Kong's hash before loadedHash follows
		// (read loading, then loadedHash again: the load may end between).
		if got != want && got != l.loading.Load().(string) && got != l.loadedHash.Load().(string) {
			l.log.Warn("Kong does not hold konglet's configuration (restarted?); loading it again", "kong_hash", got, "want_hash", want)
			l.metrics.kongRestarts.Inc()
			l.loadedHash.Store("")
			l.cache.Notify()
		}
	}
}

// maxRefusalRounds bounds how often one sync rebuilds the configuration
// after Kong refused entities.
const maxRefusalRounds = 5

// Sync runs one translation, load and status write.
func (l *Loop) Sync(ctx context.Context) error {
	start := l.now()
	defer func() { l.metrics.syncDuration.Observe(l.now().Sub(start).Seconds()) }()
	info, err := l.kong.Info(ctx)
	if err != nil {
		l.metrics.kongReachable.Set(0)
		l.metrics.pushes.WithLabelValues(pushFailed).Inc()
		err = fmt.Errorf("reading Kong's GET /: %w", err)
		// Tell the leader (and the readiness gate) that this replica is
		// behind; the caches still give the Pod to report on.
		if snap, serr := l.cache.Snapshot(l.opts.ControllerName, snapshot.Kong{}, l.opts.ServiceUpstream); serr == nil {
			l.reportLoad(ctx, snap, "", err)
		}
		return err
	}
	l.metrics.kongReachable.Set(1)
	if info.NodeID != l.kongNode {
		// A new node id is a Kong (re)started: say what it is once.
		l.kongNode = info.NodeID
		l.log.Info("Kong found", "version", info.Version, "node_id", info.NodeID, "router_flavor", info.RouterFlavor)
	}
	snap, err := l.cache.Snapshot(l.opts.ControllerName, KongFromInfo(info), l.opts.ServiceUpstream)
	if err != nil {
		return err
	}
	l.refusals.forgetChanged(snap)
	l.log.Debug("snapshot", "gateways", len(snap.Gateways), "httproutes", len(snap.HTTPRoutes), "services", len(snap.Services),
		"router", snap.Kong.RouterFlavor, "publish_service", snap.PublishService != nil)
	var result translate.Result
	var hash string
	var loadErr error
	for round := 0; ; round++ {
		result = l.memo.Translate(snap, l.refusals.forTranslation())
		doc, sizes, err := declarative.MarshalSizes(result.Config)
		if err != nil {
			return err
		}
		if round < maxRefusalRounds && l.fitBudget(snap, result.Config, doc, sizes) {
			l.log.Warn("configuration over budget; routes left out or let back in", "bytes", len(doc), "left_out", l.refusals.describe())
			continue
		}
		hash, loadErr = l.load(ctx, doc, result.Config)
		le, refused := admin.IsRefusal(loadErr)
		if !refused || round == maxRefusalRounds {
			break
		}
		if !l.refusals.add(snap, result, le.Entities) {
			break // nothing we can trace back to an object: do not loop
		}
		l.log.Warn("Kong refused objects; loading the configuration without them", "objects", l.refusals.describe())
	}
	l.metrics.refused.Set(float64(len(l.refusals)))
	l.announceRefusals(ctx, snap)
	l.reportLoad(ctx, snap, hash, loadErr)
	if loadErr != nil {
		markNotProgrammed(&result.Status, loadErr)
	} else {
		status.ApplyReplicas(&result.Status, snap, hash)
	}
	l.offerStatus(statusJob{snap: snap, status: result.Status})
	return loadErr
}

// reportLoad sets this replica's load condition on its own Pod.
func (l *Loop) reportLoad(ctx context.Context, snap *snapshot.Snapshot, hash string, loadErr error) {
	if l.pods == nil {
		return
	}
	if _, err := l.pods.Report(ctx, snap.Pod, status.LoadCondition(hash, loadErr)); err != nil {
		l.log.Error("reporting the load on the Pod", "error", err.Error())
	}
}

// announceRefusals puts an Event on each refused object not announced yet.
func (l *Loop) announceRefusals(ctx context.Context, snap *snapshot.Snapshot) {
	if l.events == nil {
		return
	}
	for ref, r := range l.refusals {
		if r.announced {
			continue
		}
		written, err := l.events.Refused(ctx, snap, ref, r.message)
		if err != nil {
			l.log.Error("recording an Event", "object", ref.Kind+" "+ref.Namespace+"/"+ref.Name, "error", err.Error())
		}
		if written {
			r.announced = true
			l.refusals[ref] = r
		}
	}
}

// load sends the configuration document of cfg unless Kong already holds
// it, and returns its hash.
func (l *Loop) load(ctx context.Context, doc []byte, cfg *declarative.Config) (string, error) {
	hash := declarative.Hash(doc)
	l.metrics.configBytes.Set(float64(len(doc)))
	l.metrics.kongRoutes.Set(float64(countRoutes(cfg)))
	if hash == l.loadedHash.Load().(string) {
		if current, err := l.kong.ConfigHash(ctx); err == nil && current == hash {
			l.metrics.pushes.WithLabelValues(pushUnchanged).Inc()
			l.metrics.lastSuccess.Set(float64(l.now().Unix()))
			return hash, nil
		}
	}
	l.loading.Store(hash)
	defer l.loading.Store("")
	if err := l.kong.Load(ctx, doc); err != nil {
		result := pushFailed
		if _, refused := admin.IsRefusal(err); refused {
			result = pushRefused
		}
		l.metrics.pushes.WithLabelValues(result).Inc()
		return hash, err
	}
	l.loadedHash.Store(hash)
	l.metrics.pushes.WithLabelValues(pushLoaded).Inc()
	l.metrics.lastSuccess.Set(float64(l.now().Unix()))
	l.log.Info("Kong loaded the configuration", "hash", hash, "bytes", len(doc), "routes", countRoutes(cfg))
	return hash, nil
}

func countRoutes(cfg *declarative.Config) int {
	n := 0
	for _, s := range cfg.Services {
		n += len(s.Routes)
	}
	return n
}

// markNotProgrammed tells on every Gateway that Kong does not run the
// current configuration, and why.
func markNotProgrammed(st *translate.Status, err error) {
	for key, g := range st.Gateways {
		for i, c := range g.Conditions {
			if c.Type == string(gwv1.GatewayConditionProgrammed) && c.Status == metav1.ConditionTrue {
				g.Conditions[i].Status = metav1.ConditionFalse
				g.Conditions[i].Reason = string(gwv1.GatewayReasonPending)
				g.Conditions[i].Message = "Kong has not loaded the current configuration: " + err.Error()
			}
		}
		st.Gateways[key] = g
	}
}

// KongFromInfo is what the translation needs to know of the Kong that GET /
// described.
func KongFromInfo(info admin.Info) snapshot.Kong {
	k := snapshot.Kong{
		RouterFlavor:   info.RouterFlavor,
		PortMaps:       info.PortMaps,
		EnabledPlugins: info.EnabledPlugins,
		PluginsKnown:   true,
		UntrustedLua:   info.UntrustedLua,
	}
	for _, l := range info.ProxyListeners {
		k.ProxyListens = append(k.ProxyListens, snapshot.Listen{Port: l.Port, SSL: l.SSL, HTTP2: l.HTTP2})
	}
	for _, l := range info.StreamListeners {
		k.StreamListens = append(k.StreamListens, snapshot.Listen{Port: l.Port, SSL: l.SSL, UDP: l.UDP})
	}
	return k
}
