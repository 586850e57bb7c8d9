package informers

import (
	"maps"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/konglet/konglet/sync/snapshot"
)

// backendIndex holds the cached Services and EndpointSlices the way a
// Snapshot does (by name, and by Service), kept so on every event: a sync
// would otherwise index every Service and EndpointSlice of the cluster
// again, most of what a snapshot costs. A snapshot takes the maps as they
// are; the change that follows copies the map it changes first (a map is
// copied table by table, several times faster than it is built), so that
// what a snapshot holds never changes.
type backendIndex struct {
	mu       sync.Mutex
	services map[types.NamespacedName]*snapshot.Service
	slices   map[types.NamespacedName][]*snapshot.EndpointSlice
	// servicesOut and slicesOut: the map was handed to a snapshot.
	servicesOut, slicesOut bool
	// version counts the changes (snapshot.Snapshot.BackendsVersion),
	// clusterIPsVersion those of a Service's cluster IPs (ClusterIPsVersion).
	version, clusterIPsVersion uint64
}

func newBackendIndex() *backendIndex {
	return &backendIndex{services: map[types.NamespacedName]*snapshot.Service{}, slices: map[types.NamespacedName][]*snapshot.EndpointSlice{},
		version: 1, clusterIPsVersion: 1}
}

// handOut returns the maps for a snapshot, which must not change them,
// and their versions.
func (x *backendIndex) handOut() (map[types.NamespacedName]*snapshot.Service, map[types.NamespacedName][]*snapshot.EndpointSlice, versions) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.servicesOut, x.slicesOut = true, true
	return x.services, x.slices, versions{x.version, x.clusterIPsVersion}
}

// changedSince tells whether the index holds another version than
// services and endpointSlices (maps it handed out) of a Service that named
// has and before has not, or of its EndpointSlices.
func (x *backendIndex) changedSince(services map[types.NamespacedName]*snapshot.Service, endpointSlices map[types.NamespacedName][]*snapshot.EndpointSlice,
	named, before map[types.NamespacedName]bool) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	for key := range named {
		if !before[key] && (x.services[key] != services[key] || !slices.Equal(x.slices[key], endpointSlices[key])) {
			return true
		}
	}
	return false
}

// versions are an index's versions of its backends and cluster IPs.
type versions struct{ backends, clusterIPs uint64 }

// put records a Service or an EndpointSlice as the cache now holds it;
// old is its previous version (nil when added).
func (x *backendIndex) put(old, obj any) {
	x.mu.Lock()
	defer x.mu.Unlock()
	switch o := obj.(type) {
	case *snapshot.Service:
		x.writableServices()
		if !slices.Equal(clusterIPs(old), clusterIPs(o)) {
			x.clusterIPsVersion++
		}
		x.services[o.Key()] = o
	case *snapshot.EndpointSlice:
		x.writableSlices()
		if prev, ok := old.(*snapshot.EndpointSlice); ok && prev.ServiceKey() != o.ServiceKey() {
			x.removeSlice(prev) // its service-name label changed
		}
		x.slices[o.ServiceKey()] = snapshot.WithEndpointSlice(x.slices[o.ServiceKey()], o)
	}
}

// remove forgets a deleted Service or EndpointSlice.
func (x *backendIndex) remove(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	switch o := obj.(type) {
	case *snapshot.Service:
		x.writableServices()
		if hasClusterIP(o) {
			x.clusterIPsVersion++
		}
		delete(x.services, o.Key())
	case *snapshot.EndpointSlice:
		x.writableSlices()
		x.removeSlice(o)
	}
}

func (x *backendIndex) removeSlice(es *snapshot.EndpointSlice) {
	key := es.ServiceKey()
	if list := snapshot.WithoutEndpointSlice(x.slices[key], es.Name); list != nil {
		x.slices[key] = list
	} else {
		delete(x.slices, key)
	}
}

func (x *backendIndex) writableServices() {
	x.version++
	if x.servicesOut {
		x.services, x.servicesOut = maps.Clone(x.services), false
	}
}

func (x *backendIndex) writableSlices() {
	x.version++
	if x.slicesOut {
		x.slices, x.slicesOut = maps.Clone(x.slices), false
	}
}
