package informers

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/konglet/konglet/sync/snapshot"
)

// TestBackendIndexNeverChangesWhatASnapshotHolds: the index follows every
// change (a slice's service-name label too, and deletes), keeps each
// Service's slices in name order, and the maps a snapshot took stay as
// they were.
func TestBackendIndexNeverChangesWhatASnapshotHolds(t *testing.T) {
	svc := func(name, rv string) *snapshot.Service {
		return &snapshot.Service{Namespace: "app", Name: name, ResourceVersion: rv}
	}
	slice := func(name, service, rv string) *snapshot.EndpointSlice {
		return &snapshot.EndpointSlice{Namespace: "app", Name: name, ServiceName: service, ResourceVersion: rv}
	}
	key := func(name string) types.NamespacedName { return types.NamespacedName{Namespace: "app", Name: name} }
	type state struct {
		services map[types.NamespacedName]*snapshot.Service
		slices   map[types.NamespacedName][]*snapshot.EndpointSlice
	}
	x := newBackendIndex()
	a1, s2, s1 := svc("a", "1"), slice("s2", "a", "1"), slice("s1", "a", "1")
	x.put(nil, a1)
	x.put(nil, s2)
	x.put(nil, s1)
	x.put(nil, svc("gone", "1"))
	var first state
	var v1, v2 versions
	first.services, first.slices, v1 = x.handOut()
	if _, _, again := x.handOut(); again != v1 {
		t.Errorf("nothing changed, yet the version went %d -> %d", v1, again)
	}
	want1 := state{map[types.NamespacedName]*snapshot.Service{key("a"): a1, key("gone"): svc("gone", "1")},
		map[types.NamespacedName][]*snapshot.EndpointSlice{key("a"): {s1, s2}}}
	if !reflect.DeepEqual(first, want1) {
		t.Fatalf("first snapshot %+v, want %+v", first, want1)
	}

	a2, s3, s1b := svc("a", "2"), slice("s3", "a", "1"), slice("s1", "b", "2")
	x.put(a1, a2)
	x.remove(cache.DeletedFinalStateUnknown{Key: "app/gone", Obj: svc("gone", "1")})
	x.put(nil, s3)
	x.put(s1, s1b) // moves to Service b
	x.remove(s2)
	var second state
	second.services, second.slices, v2 = x.handOut()
	if v2.backends == v1.backends || v2.clusterIPs != v1.clusterIPs {
		t.Errorf("versions %+v -> %+v through changes of no cluster IP: want only the backends' to move", v1, v2)
	}
	want2 := state{map[types.NamespacedName]*snapshot.Service{key("a"): a2},
		map[types.NamespacedName][]*snapshot.EndpointSlice{key("a"): {s3}, key("b"): {s1b}}}
	if !reflect.DeepEqual(second, want2) {
		t.Errorf("second snapshot %+v, want %+v", second, want2)
	}
	if !reflect.DeepEqual(first, want1) || first.services[key("a")] != a1 || first.slices[key("a")][0] != s1 {
		t.Errorf("the first snapshot's maps changed: %+v", first)
	}

	x.remove(s3)
	_, third, _ := x.handOut()
	if _, ok := third[key("a")]; ok {
		t.Errorf("a Service without slices still listed: %v", third)
	}

	// A Service given cluster IPs, then another set, then deleted: each
	// moves the cluster IPs' version; a change of its ports does not.
	withIPs := func(rv string, ips ...string) *snapshot.Service {
		s := svc("db", rv)
		s.ClusterIPs = ips
		return s
	}
	_, _, last := x.handOut()
	step := func(what string, change func(), moves bool) {
		t.Helper()
		change()
		_, _, now := x.handOut()
		if moved := now.clusterIPs != last.clusterIPs; moved != moves {
			t.Errorf("%s: cluster IPs' version moved %v, want %v", what, moved, moves)
		}
		last = now
	}
	step("created with a cluster IP", func() { x.put(nil, withIPs("1", "10.96.0.7")) }, true)
	step("its ports changed", func() { x.put(withIPs("1", "10.96.0.7"), withIPs("2", "10.96.0.7")) }, false)
	step("another cluster IP", func() { x.put(withIPs("2", "10.96.0.7"), withIPs("3", "10.96.0.8")) }, true)
	step("deleted", func() { x.remove(withIPs("3", "10.96.0.8")) }, true)
}
