package reconcile

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/konglet/konglet/proxy/admin"
	"github.com/konglet/konglet/sync/snapshot"
)

// objectsCache builds each snapshot for the Kong it is asked for, as the
// informers' cache does.
type objectsCache struct {
	fakeCache
	objs snapshot.Objects
}

func (c *objectsCache) Snapshot(kong snapshot.Kong) (*snapshot.Snapshot, error) {
	return c.objs.Build(snapshot.DefaultControllerName, nil, snapshotPublish, kong), nil
}

// flavorKong answers GET / with the router flavor it is set to.
type flavorKong struct {
	fakeKong
	flavor atomic.Value
}

func (k *flavorKong) Info(ctx context.Context) (admin.Info, error) {
	info, err := k.fakeKong.Info(ctx)
	info.RouterFlavor = k.flavor.Load().(string)
	return info, err
}

// TestSyncTranslatesForKongAsItAnswersNow: a sync translates while it asks
// Kong's GET /, for the Kong seen last; when the answer differs (a Kong
// restarted with another router), what it loads is for the Kong that
// answered.
func TestSyncTranslatesForKongAsItAnswersNow(t *testing.T) {
	cache := &objectsCache{}
	if err := cache.objs.Decode(strings.NewReader(budgetBase+service("a")+route("a", "r", 1, 1)), "test"); err != nil {
		t.Fatal(err)
	}
	kong := &flavorKong{}
	kong.flavor.Store(snapshot.RouterExpressions)
	l := New(cache, kong, nil, nil, nil, slog.New(slog.NewTextHandler(io.Discard, nil)), NewMetrics(prometheus.NewRegistry()), Options{})
	ctx := context.Background()
	for _, flavor := range []string{snapshot.RouterExpressions, snapshot.RouterTraditionalCompat, snapshot.RouterTraditionalCompat, snapshot.RouterExpressions} {
		kong.flavor.Store(flavor)
		if err := l.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if expressions := bytes.Contains(kong.loaded, []byte(`"expression":`)); expressions != (flavor == snapshot.RouterExpressions) {
			t.Fatalf("Kong answers router_flavor %s; the configuration loaded has expressions: %v", flavor, expressions)
		}
	}
}
