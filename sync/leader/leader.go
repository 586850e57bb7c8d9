// Package leader elects, per bound Gateway, the one replica that writes its
// status (a coordination.k8s.io Lease each). Every replica keeps loading
// its own Kong whether it leads or not.
package leader

import (
	"context"
	"log/slog"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/konglet/konglet/sync/status"
)

// Timing is the Lease timing (client-go's meaning).
type Timing struct {
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// Elector runs one election per Gateway.
type Elector struct {
	mu      sync.RWMutex
	leading map[types.NamespacedName]bool
	// running counts the elections still under way; each releases its
	// Lease when ctx ends (ReleaseOnCancel) before it returns.
	running sync.WaitGroup
}

// LeaseName is the Lease that elects the status writer of a Gateway; it
// lives in the Gateway's namespace.
func LeaseName(gateway types.NamespacedName) string {
	return status.ObjectName("konglet-", gateway.Name, "")
}

// Run takes part in the elections of every gateway until ctx ends. changed
// is called whenever this replica gains or loses a lead, so that a new
// leader writes the current status at once.
func Run(ctx context.Context, kube kubernetes.Interface, gateways []types.NamespacedName, identity string, timing Timing, log *slog.Logger, changed func()) *Elector {
	e := &Elector{leading: map[types.NamespacedName]bool{}}
	for _, g := range gateways {
		e.running.Go(func() { e.elect(ctx, kube, g, identity, timing, log, changed) })
	}
	return e
}

// Released waits, at most timeout, for every election to end after ctx
// did, and so for the Leases this replica held to be released: the next
// leader takes over within its retry period instead of the lease duration.
func (e *Elector) Released(timeout time.Duration) bool {
	done := make(chan struct{})
	go func() {
		e.running.Wait()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-time.After(timeout):
		return false
	}
}

func (e *Elector) elect(ctx context.Context, kube kubernetes.Interface, g types.NamespacedName, identity string, timing Timing, log *slog.Logger, changed func()) {
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: g.Namespace, Name: LeaseName(g)},
		Client:     kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: identity},
	}
	set := func(lead bool) {
		e.mu.Lock()
		e.leading[g] = lead
		e.mu.Unlock()
		log.Info("status leadership changed", "gateway", g.String(), "leading", lead)
		changed()
	}
	// RunOrDie returns when the lead is lost: stand again until ctx ends.
	for ctx.Err() == nil {
		leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
			Lock:            lock,
			LeaseDuration:   timing.LeaseDuration,
			RenewDeadline:   timing.RenewDeadline,
			RetryPeriod:     timing.RetryPeriod,
			ReleaseOnCancel: true,
			Name:            g.String(),
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(context.Context) { set(true) },
				OnStoppedLeading: func() { set(false) },
			},
		})
	}
}

// Leads tells whether this replica writes the status of the Gateway.
func (e *Elector) Leads(g types.NamespacedName) bool {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.leading[g]
}
