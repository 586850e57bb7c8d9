package e2e

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/konglet/konglet/test/kongdouble"
)

// TestLeaderReleasesLeaseOnSIGTERM: with the default 15 s Lease, a leader
// that gets SIGTERM gives its Lease back before it exits, so the other
// replica writes a new route's status within 3 s, not after the lease
// duration.
func TestLeaderReleasesLeaseOnSIGTERM(t *testing.T) {
	w := newWorld(t)
	w.backend(w.ns, "app", 80, 8080, "198.18.0.60")
	pods := []string{"kong-a", "kong-b"}
	procs := make([]*process, len(pods))
	for i, name := range pods {
		w.createPod(name)
		kong := kongdouble.New(kongdouble.Options{})
		defer kong.Close()
		procs[i] = startKonglet(t, kong, append(w.kongletArgs(), "--pod-name", name, "--pod-namespace", w.ns,
			"--lease-duration", "15s", "--lease-renew-deadline", "10s", "--lease-retry-period", "500ms")...)
	}
	// A written status shows that the Lease holder knows it leads (a
	// SIGTERM while it is still taking the Lease leaves nothing to release).
	w.create(w.route("before", []string{"before.example.com"}, gwv1.HTTPRouteRule{BackendRefs: []gwv1.HTTPBackendRef{backendRef("", "app", 80, 1)}}))
	eventually(t, 20*time.Second, "the leader writes statuses", func() error {
		_, err := w.routeParent("before")
		return err
	})
	leader := leaderIndex(t, w, pods)
	if leader < 0 {
		t.Fatal("statuses written, but nobody holds the Lease")
	}

	if err := syscall.Kill(procs[leader].Pid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	signalled := time.Now()
	eventually(t, 10*time.Second, "the leader exits", func() error {
		if !procs[leader].Exited() {
			return fmt.Errorf("still running")
		}
		return nil
	})
	// Counted from the exit: how long the process takes to stop depends on
	// the machine's load; the Lease, 15 s without the release, does not.
	exited := time.Now()
	w.create(w.route("after", []string{"after.example.com"}, gwv1.HTTPRouteRule{BackendRefs: []gwv1.HTTPBackendRef{backendRef("", "app", 80, 1)}}))
	eventually(t, 3*time.Second, "the other replica writes the new route's status", func() error {
		_, err := w.routeParent("after")
		return err
	})
	t.Logf("the leader stopped %v after SIGTERM; a route created then had its status %v later", exited.Sub(signalled), time.Since(exited))
	if next := leaderIndex(t, w, pods); next == leader {
		t.Fatalf("the stopped replica still holds the Lease")
	}
}
