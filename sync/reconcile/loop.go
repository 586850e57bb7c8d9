// Package reconcile is konglet's sync loop: on every coalesced change it
// translates a snapshot of the caches, loads the result into the local Kong
// and writes the statuses.
package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

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
	HasUpstream(ctx context.Context, name string) (bool, error)
}

// Cache is the informer cache the loop reads.
type Cache interface {
	WaitForSync(ctx context.Context) bool
	Snapshot(kong snapshot.Kong) (*snapshot.Snapshot, error)
	// StatusSnapshot is the objects statuses are written against; unlike
	// Snapshot it records nothing and waits for nothing.
	StatusSnapshot() (*snapshot.Snapshot, error)
	Notify()
	Wait(ctx context.Context) error
	// WaitStatus blocks until something that only statuses depend on
	// changed (a Pod's konglet conditions).
	WaitStatus(ctx context.Context) error
}

// StatusWriter writes statuses; whether this replica leads is the writer's
// business.
type StatusWriter interface {
	Write(ctx context.Context, snap *snapshot.Snapshot, desired translate.Status) (status.Result, error)
	// Leading tells whether this replica writes any Gateway's statuses.
	Leading() bool
}

// EventRecorder tells users, on their objects, what Kong refused.
type EventRecorder interface {
	// Refused tells whether it wrote the Event (only a leader writes).
	Refused(ctx context.Context, snap *snapshot.Snapshot, ref translate.ObjectRef, message string) (bool, error)
}

// PodReporter sets this replica's conditions on its own Pod. current is
// the Pod as last known (nil: read it); it returns the Pod as it now is.
type PodReporter interface {
	Report(ctx context.Context, current *corev1.Pod, want []corev1.PodCondition) (*corev1.Pod, error)
}

// Options tune the loop.
type Options struct {
	// KongPollInterval is how often Kong's configuration hash is checked, to
	// load again at once after Kong restarts.
	KongPollInterval time.Duration
	// MinBackoff and MaxBackoff bound the retry delay after a failure.
	MinBackoff, MaxBackoff time.Duration
	Budget                 Budget
	// Gateways are the bound Gateways (--gateway): the Pod is not ready
	// while none of them can be served.
	Gateways []types.NamespacedName
	// PodName is this replica's Pod, whose own state the loop knows before
	// its Pod shows it.
	PodName string
	// Synced, if set, runs once the caches have synced, before the first
	// sync: the start is over (konglet releases the pages it touched).
	Synced func()
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

	loading atomic.Bool // a load is in flight
	// syncing tells whether a sync runs, syncEnded when the last one
	// ended (stored before syncing is cleared; on the monotonic clock, as
	// nanoseconds since created), and statusSyncs and podSyncs are each
	// signalled when one starts or ends: status writes and Pod reports
	// wait for the syncs to pause, each on its own signal.
	syncing               atomic.Bool
	syncEnded             atomic.Int64
	statusSyncs, podSyncs chan struct{}
	created               time.Time
	// statusQuiet and statusMaxDelay are the constants but in tests.
	statusQuiet, statusMaxDelay time.Duration

	mu sync.Mutex
	// state is what this replica knows of its Kong, which its Pod
	// conditions and /readyz tell.
	state status.Load

	// offerMu orders the offers of statuses: base is the last
	// translation's, before replicas are applied, which a peer's change
	// applies again to.
	offerMu sync.Mutex
	base    *translated // nil before the first translation
	// statuses holds the newest statuses to write (at most one: a newer
	// one replaces it), so that writing them never delays Kong's loads.
	statuses chan statusJob
	// podStates holds the newest Pod conditions to write, likewise.
	podStates chan []corev1.PodCondition
	refusals  refusals
	memo      translate.Memo      // the previous translation's work, for the next
	encoder   declarative.Encoder // the previous document, for the next
	hasher    declarative.Hasher  // the last document hashed, to hash the next one from where it differs
	failures  int
	kongNode  string      // the node id of the Kong last seen
	info      *admin.Info // GET / as last answered: translations go on while Kong is down
	problems  map[types.NamespacedName]string
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
	l := &Loop{cache: cache, kong: kong, status: writer, pods: pods, events: events, log: log, metrics: metrics, opts: opts, now: time.Now, created: time.Now(), refusals: refusals{},
		statuses: make(chan statusJob, 1), statusSyncs: make(chan struct{}, 1), podSyncs: make(chan struct{}, 1), statusQuiet: statusQuiet, statusMaxDelay: statusMaxDelay, podStates: make(chan []corev1.PodCondition, 1)}
	return l
}

// Ready tells whether this Pod may take traffic: its Kong holds a
// configuration from konglet (any one: a failed load leaves Kong serving
// the last good one), and a bound Gateway can be served.
func (l *Loop) Ready() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state.Ready()
}

// Run syncs until ctx ends. Nothing is pushed before the caches have synced,
// so Kong never receives a configuration built from a partial view; but
// Kong is asked at once what it holds, so that a restarted konglet is
// ready before the API server answers when Kong holds its configuration.
func (l *Loop) Run(ctx context.Context) error {
	go l.reportPod(ctx)
	go l.watchKong(ctx)
	if !l.cache.WaitForSync(ctx) {
		return nil // stopped before the caches synced: a clean stop too
	}
	l.log.Info("caches synced")
	if l.opts.Synced != nil {
		l.opts.Synced()
	}
	go l.writeStatuses(ctx)
	go l.watchPeers(ctx)
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

// translated is one translation's statuses and the hash of its
// configuration.
type translated struct {
	status translate.Status
	hash   string
}

// statusJob is statuses to write and the snapshot they are written against.
type statusJob struct {
	translated
	snap *snapshot.Snapshot
	// offered is when the statuses it replaced, unwritten, were offered
	// (its own offer when none).
	offered time.Time
}

// offerStatus queues base's statuses, to be written against snap, with
// Programmed decided from the replicas snap shows, dropping older ones not
// written yet. Callers hold offerMu, so draining then sending cannot block.
func (l *Loop) offerStatus(base translated, snap *snapshot.Snapshot) {
	l.mu.Lock()
	self := l.state
	l.mu.Unlock()
	list := status.Replicas(snap, l.opts.PodName, self)
	if len(list) == 0 {
		// No endpoints to count (no publish Service, or none yet): this
		// replica speaks for itself.
		list = []status.Replica{status.ReplicaFrom(l.opts.PodName, true, self.Conditions())}
	}
	job := statusJob{translated{status.ApplyReplicas(base.status, list, base.hash), base.hash}, snap, time.Now()}
	select {
	case older := <-l.statuses:
		job.offered = older.offered
	default:
	}
	l.statuses <- job
}

// Peers load a change at about the same time and each then writes its
// Pod: the leader waits for their Pods to settle (no change for peerQuiet,
// at most peerMaxDelay) and writes the Gateways' Programmed once per round
// instead of once per replica.
const (
	peerQuiet    = 100 * time.Millisecond
	peerMaxDelay = time.Second
)

// watchPeers applies the replicas again to the last translation's statuses
// when a Pod's conditions change: only the leader does, and without a sync
// (every replica's load changes its own Pod; a sync on each would make N²).
func (l *Loop) watchPeers(ctx context.Context) {
	for l.cache.WaitStatus(ctx) == nil {
		if l.status == nil || !l.status.Leading() {
			continue
		}
		if settle(ctx, l.cache.WaitStatus, peerQuiet, peerMaxDelay) != nil {
			return
		}
		snap, err := l.cache.StatusSnapshot()
		if err != nil {
			continue
		}
		l.offerMu.Lock()
		if l.base != nil {
			// The statuses are the last translation's, the objects the
			// cache's current ones: the writer trusts a cached object
			// only at the version it last wrote or read, and the
			// translation's objects are older than its writes since (each
			// would be read again from the API server).
			l.offerStatus(*l.base, snap)
		}
		l.offerMu.Unlock()
	}
}

// settle returns once wait has seen no change for quiet, or limit after it
// was called, or with ctx's error when ctx ends.
func settle(ctx context.Context, wait func(context.Context) error, quiet, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		d := min(quiet, time.Until(deadline))
		if d <= 0 {
			return ctx.Err()
		}
		waitCtx, cancel := context.WithTimeout(ctx, d)
		err := wait(waitCtx)
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			return nil // quiet for d
		}
	}
}

// podRetry is the delay before writing the Pod conditions again after a
// failure (the API server may be away).
const podRetry = time.Second

// publish tells the Pod and the metrics about the current state.
func (l *Loop) publish() {
	// Under mu, so that of two publishes the newer state is the one left
	// in the slot; the sends cannot block (only publish sends).
	l.mu.Lock()
	defer l.mu.Unlock()
	current := 0.0
	if l.state.Current() {
		current = 1
	}
	l.metrics.configCurrent.Set(current)
	select {
	case <-l.podStates:
	default:
	}
	l.podStates <- l.state.Conditions()
}

// reportPod writes the newest conditions on this replica's Pod, from the
// first one on: a restarted konglet tells as soon as the API server
// answers, caches synced or not. It knows the Pod from its own writes
// (the informer cache may lag behind them). After the first, a report
// yields to syncs as status writes do (statusQuiet, at most
// statusMaxDelay): every load changes the conditions, and a PATCH per
// load, which every replica's Pod watch receives, went to the API server
// while the next change was on its way to Kong.
func (l *Loop) reportPod(ctx context.Context) {
	if l.pods == nil {
		return
	}
	var pod *corev1.Pod
	for {
		var want []corev1.PodCondition
		select {
		case <-ctx.Done():
			return
		case want = <-l.podStates:
		}
		if pod != nil {
			if l.syncsPause(ctx, l.podSyncs, l.statusQuiet, l.statusMaxDelay) != nil {
				return
			}
			select {
			case want = <-l.podStates: // newer ones came meanwhile
			default:
			}
		}
		for {
			now, err := l.pods.Report(ctx, pod, want)
			if err == nil {
				pod = now
				break
			}
			if ctx.Err() != nil {
				return
			}
			l.log.Error("reporting on the Pod; retrying", "error", err.Error(), "retry_in", podRetry.String())
			select {
			case <-ctx.Done():
				return
			case want = <-l.podStates:
			case <-time.After(podRetry):
			}
		}
	}
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
		// A writer behind (its last writes took longer than the delay)
		// waits a quiet period at most: syncs keep a turn.
		if l.syncsPause(ctx, l.statusSyncs, l.statusQuiet, max(time.Until(job.offered.Add(l.statusMaxDelay)), l.statusQuiet)) != nil {
			return
		}
		select {
		case job = <-l.statuses: // newer ones came meanwhile
		default:
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

// Status writes yield to syncs: on a Pod of two cores, the API requests
// of a write, and the watch events they cause, slowed the next change's
// way to Kong by a third. Statuses wait until no sync has run for
// statusQuiet, but no longer than statusMaxDelay after they (or the
// unwritten ones they replaced) were offered: a writer that fell behind,
// under a steady stream of changes, waits a quiet period at most. A write
// under way is not interrupted.
const (
	statusQuiet    = 30 * time.Millisecond
	statusMaxDelay = 250 * time.Millisecond
)

// syncsPause returns once no sync has run for quiet, or limit after it
// was called, or with ctx's error when ctx ends. signals is the caller's
// own signal of syncs starting and ending.
func (l *Loop) syncsPause(ctx context.Context, signals chan struct{}, quiet, limit time.Duration) error {
	wait := func(ctx context.Context) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-signals:
			return nil
		}
	}
	deadline := time.Now().Add(limit)
	for {
		// settle sees no signal during a long sync: it is waited out.
		if err := settle(ctx, wait, quiet, time.Until(deadline)); err != nil {
			return err
		}
		// A sync that ended as the quiet period did has not been quiet
		// for one: its end signal may not even be sent yet. (syncing is
		// read first: syncEnded is stored before it is cleared.)
		if !l.syncing.Load() && l.sinceSyncEnded() >= quiet || !time.Now().Before(deadline) {
			return nil
		}
	}
}

func (l *Loop) markSyncEnded() { l.syncEnded.Store(int64(time.Since(l.created))) }

func (l *Loop) sinceSyncEnded() time.Duration {
	return time.Since(l.created) - time.Duration(l.syncEnded.Load())
}

func (l *Loop) signalSync() {
	for _, signals := range []chan struct{}{l.statusSyncs, l.podSyncs} {
		select {
		case signals <- struct{}{}:
		default:
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

// held is the hash of the konglet configuration Kong holds, "" if none.
func (l *Loop) held() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state.Held
}

func (l *Loop) setHeld(hash string) {
	l.mu.Lock()
	l.state.Held = hash
	l.mu.Unlock()
}

// zeroHash is Kong's configuration_hash while it holds no configuration.
const zeroHash = "00000000000000000000000000000000"

// watchKong asks Kong what it holds at once, then polls its configuration
// hash: a Kong that restarted (zero hash) or holds another configuration
// gets ours again without waiting for a cluster change.
func (l *Loop) watchKong(ctx context.Context) {
	t := time.NewTicker(l.opts.KongPollInterval)
	defer t.Stop()
	known := false // whether Kong answered once
	for {
		if l.checkKong(ctx) && !known {
			known = true
			l.publish()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// checkKong compares the configuration Kong holds with the one konglet
// believes it holds, and tells whether Kong answered. Kong holds one of
// konglet's when its hash is not zero and it has the marker upstream: a
// restarted konglet takes it over (ready at once); a Kong without one (it
// restarted, or something else loaded it) is loaded again.
func (l *Loop) checkKong(ctx context.Context) bool {
	want := l.held()
	got, err := l.kong.ConfigHash(ctx)
	if err != nil {
		l.metrics.kongReachable.Set(0)
		return false
	}
	l.metrics.kongReachable.Set(1)
	// A load in flight changes Kong's hash before held follows, and its
	// outcome tells what Kong holds (a failed load is retried); read
	// loading, then held again: the load may end between.
	if got == want || l.loading.Load() || got == l.held() {
		return true
	}
	ours := false
	if got != zeroHash {
		if ours, err = l.kong.HasUpstream(ctx, translate.MarkerUpstream); err != nil {
			return false
		}
	}
	switch {
	case want != "":
		l.log.Warn("Kong does not hold the configuration konglet loaded (restarted?); loading it again", "kong_hash", got, "want_hash", want, "kong_holds_konglets", ours)
		l.metrics.kongRestarts.Inc()
	case ours:
		l.log.Info("Kong holds a configuration from konglet: ready", "kong_hash", got)
	default:
		return true
	}
	if !ours {
		got = ""
	}
	l.setHeld(got)
	l.publish()
	l.cache.Notify()
	return true
}

// maxRefusalRounds bounds how often one sync rebuilds the configuration
// after Kong refused entities.
const maxRefusalRounds = 5

// Sync translates the caches and loads the result into Kong (translating
// again when Kong's GET / differs from the last answer, or without what
// Kong refused), then offers the statuses to the writer.
func (l *Loop) Sync(ctx context.Context) error {
	l.syncing.Store(true)
	l.signalSync()
	defer func() {
		l.markSyncEnded()
		l.syncing.Store(false)
		l.signalSync()
	}()
	start := l.now()
	defer func() { l.metrics.syncDuration.Observe(l.now().Sub(start).Seconds()) }()
	// GET / of a busy Kong takes milliseconds: it is asked while the
	// change is translated for the Kong last seen (Kong's settings change
	// only when it restarts), and only an answer that differs costs a
	// second translation.
	asked := make(chan infoAnswer, 1)
	go func() {
		info, err := l.kong.Info(ctx)
		asked <- infoAnswer{info, err}
	}()
	var tr *translation
	var trKong snapshot.Kong
	if l.info != nil {
		var err error
		trKong = KongFromInfo(*l.info)
		if tr, err = l.translateFor(trKong); err != nil {
			return err
		}
	}
	answer := <-asked
	info, kongErr := answer.info, answer.err
	switch {
	case kongErr != nil && l.info == nil:
		l.metrics.kongReachable.Set(0)
		l.metrics.pushes.WithLabelValues(pushFailed).Inc()
		return fmt.Errorf("reading Kong's GET /: %w", kongErr)
	case kongErr != nil:
		// Kong is down: translate for the Kong last seen (its settings
		// change only with a restart, which GET / shows when it is back),
		// so that statuses keep flowing.
		l.metrics.kongReachable.Set(0)
		kongErr = fmt.Errorf("reading Kong's GET /: %w", kongErr)
		info = *l.info
	default:
		l.metrics.kongReachable.Set(1)
		l.info = &info
	}
	if info.NodeID != l.kongNode {
		// A new node id is a Kong (re)started: say what it is once.
		l.kongNode = info.NodeID
		l.log.Info("Kong found", "version", info.Version, "node_id", info.NodeID, "router_flavor", info.RouterFlavor)
	}
	if kong := KongFromInfo(info); tr == nil || !trKong.Equal(kong) {
		var err error
		if tr, err = l.translateFor(kong); err != nil {
			return err
		}
	}
	snap := tr.snap
	l.log.Debug("snapshot", "gateways", len(snap.Gateways), "httproutes", len(snap.HTTPRoutes), "services", len(snap.Services),
		"router", snap.Kong.RouterFlavor, "publish_service", snap.PublishService != nil)
	var hash string
	var loadErr error
	startedOver := false
	for round := 0; ; round++ {
		if round > 0 {
			var err error
			if tr, err = l.translateSnapshot(snap); err != nil {
				return err
			}
		}
		result, doc := tr.result, tr.doc
		if round < maxRefusalRounds && l.fitBudget(snap, result.Config, doc, tr.sizes) {
			l.log.Warn("configuration over budget; routes left out or let back in", "bytes", len(doc), "left_out", l.refusals.describe())
			continue
		}
		if kongErr != nil {
			hash, loadErr = declarative.Hash(doc), kongErr
			l.metrics.pushes.WithLabelValues(pushFailed).Inc()
			break
		}
		hash, loadErr = l.load(ctx, doc, result.Config)
		le, refused := admin.IsRefusal(loadErr)
		if !refused || round == maxRefusalRounds {
			break
		}
		if !l.refusals.add(snap, result, le.Entities) {
			if startedOver {
				break // nothing we can trace back to an object: do not loop
			}
			// The Memo and the Encoder reuse what the last syncs made: a
			// flaw there must cost one load, not every load from now on.
			l.log.Warn("Kong refused the configuration and named no object of it; translating and encoding it again from scratch", "error", loadErr)
			l.memo, l.encoder, startedOver = translate.Memo{}, declarative.Encoder{}, true
			continue
		}
		l.log.Warn("Kong refused objects; loading the configuration without them", "objects", l.refusals.describe())
	}
	l.metrics.refused.Set(float64(len(l.refusals)))
	l.announceRefusals(ctx, snap)
	result := tr.result
	unusable := l.checkGateways(snap, result.Status)
	l.mu.Lock()
	l.state.Newest, l.state.Err, l.state.Unusable = hash, loadErr, unusable
	l.mu.Unlock()
	l.publish()
	l.offerMu.Lock()
	// Not its snapshot: a peer's change is applied against a new one, and
	// this one would keep every object of this sync alive until the next.
	l.base = &translated{result.Status, hash}
	l.offerStatus(*l.base, snap)
	l.offerMu.Unlock()
	return loadErr
}

// infoAnswer is Kong's answer to GET /.
type infoAnswer struct {
	info admin.Info
	err  error
}

// translation is a snapshot's configuration, encoded.
type translation struct {
	snap   *snapshot.Snapshot
	result translate.Result
	doc    []byte
	sizes  []int
}

// translateFor takes a snapshot for kong and translates it.
func (l *Loop) translateFor(kong snapshot.Kong) (*translation, error) {
	snap, err := l.cache.Snapshot(kong)
	if err != nil {
		return nil, err
	}
	l.refusals.forgetChanged(snap)
	return l.translateSnapshot(snap)
}

// translateSnapshot translates snap with the refusals as they are now.
func (l *Loop) translateSnapshot(snap *snapshot.Snapshot) (*translation, error) {
	result := l.memo.Translate(snap, l.refusals.forTranslation())
	l.metrics.routesTranslated.Add(float64(result.RoutesTranslated))
	doc, sizes, err := l.encoder.MarshalSizes(result.Config)
	if err != nil {
		return nil, err
	}
	return &translation{snap, result, doc, sizes}, nil
}

// checkGateways tells, loudly (log, metric, Pod condition), about bound
// Gateways that cannot be served, and returns why the Pod is not ready:
// "" while at least one of them can be served (the others' traffic must
// not suffer from a mistake in one).
func (l *Loop) checkGateways(snap *snapshot.Snapshot, st translate.Status) string {
	problems := status.GatewayProblems(snap, l.opts.Gateways, st)
	changed := !maps.Equal(problems, l.problems)
	l.problems = problems
	var unusable []string
	for key, problem := range problems {
		usable := 0.0
		if problem == "" {
			usable = 1
		} else {
			unusable = append(unusable, problem)
		}
		l.metrics.gatewayUsable.WithLabelValues(key.String()).Set(usable)
		if changed && problem != "" {
			l.log.Error("cannot serve a bound Gateway", "gateway", key.String(), "problem", problem)
		}
	}
	if len(unusable) < len(problems) || len(problems) == 0 {
		return ""
	}
	slices.Sort(unusable)
	return "no bound Gateway can be served: " + strings.Join(unusable, "; ")
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
	l.metrics.configBytes.Set(float64(len(doc)))
	l.metrics.kongRoutes.Set(float64(countRoutes(cfg)))
	// The hash, an md5, takes milliseconds of a large document: it is
	// taken while Kong reads the document, unless it may tell that Kong
	// holds this one already. It may when Kong holds one of konglet's that
	// is not the last hashed (konglet took over Kong's configuration at its
	// start); when Kong holds the last hashed, only that one (compared byte
	// for byte) has its hash.
	held := l.held()
	hash, known := l.hasher.Known(doc)
	if !known && held != "" && held != l.hasher.Last() {
		hash = l.hasher.Hash(doc)
	}
	if hash != "" && hash == held {
		if current, err := l.kong.ConfigHash(ctx); err == nil && current == hash {
			l.metrics.pushes.WithLabelValues(pushUnchanged).Inc()
			l.metrics.lastSuccess.Set(float64(l.now().Unix()))
			return hash, nil
		}
	}
	var hashing chan string
	if hash == "" {
		hashing = make(chan string, 1)
		go func() { hashing <- l.hasher.Hash(doc) }()
	}
	l.loading.Store(true)
	defer l.loading.Store(false)
	err := l.kong.Load(ctx, doc)
	if hashing != nil {
		hash = <-hashing
	}
	if err != nil {
		result := pushFailed
		if _, refused := admin.IsRefusal(err); refused {
			result = pushRefused
		}
		l.metrics.pushes.WithLabelValues(result).Inc()
		return hash, err
	}
	l.setHeld(hash)
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
