//go:build bench

package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/konglet/konglet/informers"
	"github.com/konglet/konglet/proxy/admin"
	"github.com/konglet/konglet/sync/leader"
	"github.com/konglet/konglet/sync/reconcile"
	"github.com/konglet/konglet/sync/snapshot"
	"github.com/konglet/konglet/sync/status"
	"github.com/konglet/konglet/sync/translate"
)

// inProcessCache is konglet's own informer cache, built in this process
// (same scope as the konglet processes), synced.
// cfg nil is konglet's: client-go's default rate limit (QPS 5, burst 10).
func (b *bencher) inProcessCache(ctx context.Context, t *testing.T, cfg *rest.Config) *informers.Cache {
	t.Helper()
	if cfg == nil {
		cfg = b.env.Config
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gwclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, err := informers.New(kube, gw, informers.Scope{
		ControllerName: controllerName,
		Gateways:       []types.NamespacedName{{Namespace: gatewayNS, Name: gatewayName}},
		PublishService: types.NamespacedName{Namespace: gatewayNS, Name: "kong-proxy"},
	}, informers.NewTrigger(20*time.Millisecond, 80*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	c.Start(ctx)
	if !c.WaitForSync(ctx) {
		t.Fatal("caches did not sync")
	}
	return c
}

// kongOf is what konglet reads from GET / of the double.
func kongOf(ctx context.Context, url string) (snapshot.Kong, error) {
	c, err := admin.New(url, 10*time.Second, 0)
	if err != nil {
		return snapshot.Kong{}, err
	}
	info, err := c.Info(ctx)
	if err != nil {
		return snapshot.Kong{}, err
	}
	return reconcile.KongFromInfo(info), nil
}

// settleStatuses brings every status to what konglet wants, with konglet's
// own translation and status writer run in this process on a client
// without konglet's rate limit, in 16 shards. It stands for a konglet that
// has been running for a while: the scenarios that follow measure a
// steady state, not the backlog of first status writes (which the status
// write scenario measures).
func (b *bencher) settleStatuses(t *testing.T) {
	t.Helper()
	start := time.Now()
	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	c := b.inProcessCache(ctx, t, nil)
	k := newKong()
	defer k.Close()
	kong, err := kongOf(ctx, k.URL())
	if err != nil {
		t.Fatal(err)
	}
	snap, err := c.Snapshot(kong)
	if err != nil {
		t.Fatal(err)
	}
	desired := translate.Translate(snap, nil).Status
	cfg := rest.CopyConfig(b.env.Config)
	cfg.QPS, cfg.Burst = 1000, 2000
	w := status.NewWriter(gwclient.NewForConfigOrDie(cfg), []types.NamespacedName{{Namespace: gatewayNS, Name: gatewayName}}, nil, time.Now)
	const shards = 16
	var wg sync.WaitGroup
	writes := make([]int, shards)
	errs := make([]error, shards)
	for s := range shards {
		part := *snap
		part.HTTPRoutes = nil
		for i, r := range snap.HTTPRoutes {
			if i%shards == s {
				part.HTTPRoutes = append(part.HTTPRoutes, r)
			}
		}
		if s != 0 {
			part.Gateways = nil
			part.GatewayClasses = map[string]*gwv1.GatewayClass{}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := w.Write(ctx, &part, desired)
			writes[s], errs[s] = res.Writes, err
		}()
	}
	wg.Wait()
	total := 0
	for _, n := range writes {
		total += n
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("settling statuses: %v", err)
	}
	t.Logf("settled statuses: %d writes in %v", total, time.Since(start).Round(time.Millisecond))
	b.results.raw("settle", map[string]any{"routes": len(snap.HTTPRoutes), "writes": total, "seconds": time.Since(start).Seconds()})
}

// holdLease makes another (imaginary) replica hold the Gateway's status
// Lease: a konglet with leader election on then runs as a follower, which
// loads its Kong and writes no status, as most replicas of a Deployment do.
func (b *bencher) holdLease(t *testing.T) {
	t.Helper()
	leases := b.c.kube.CoordinationV1().Leases(gatewayNS)
	name := leader.LeaseName(types.NamespacedName{Namespace: gatewayNS, Name: gatewayName})
	if err := leases.Delete(b.ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	now := metav1.NewMicroTime(time.Now())
	_, err := leases.Create(b.ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: gatewayNS},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr("another-replica"),
			LeaseDurationSeconds: ptr(int32(3600)),
			AcquireTime:          &now,
			RenewTime:            &now,
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// releaseLease removes the Lease again.
func (b *bencher) releaseLease(t *testing.T) {
	t.Helper()
	name := leader.LeaseName(types.NamespacedName{Namespace: gatewayNS, Name: gatewayName})
	if err := b.c.kube.CoordinationV1().Leases(gatewayNS).Delete(b.ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(fmt.Errorf("deleting the Lease: %w", err))
	}
}

// cacheSyncTime is how long konglet's informers take to list everything, in
// this process, with the given client rate limit (0: client-go's default).
func (b *bencher) cacheSyncTime(t *testing.T, qps float32, burst int) time.Duration {
	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	cfg := rest.CopyConfig(b.env.Config)
	cfg.QPS, cfg.Burst = qps, burst
	start := time.Now()
	b.inProcessCache(ctx, t, cfg)
	return time.Since(start)
}
