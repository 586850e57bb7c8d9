package translate_test

import (
	"bytes"
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/konglet/konglet/proxy/declarative"
	"github.com/konglet/konglet/sync/snapshot"
	"github.com/konglet/konglet/sync/translate"
	"github.com/konglet/konglet/test/kongdouble"
)

// FuzzTranslate feeds arbitrary Gateway API YAML to the translation: it must
// never panic, must be deterministic, and must not modify its input.
func FuzzTranslate(f *testing.F) {
	inputs := goldenInputs(f, false)
	for _, name := range slices.Sorted(maps.Keys(inputs)) {
		b, err := os.ReadFile(inputs[name][0])
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, true)
		f.Add(b, false)
	}
	f.Fuzz(func(t *testing.T, input []byte, expressions bool) {
		flavor := snapshot.RouterTraditionalCompat
		if expressions {
			flavor = snapshot.RouterExpressions
		}
		var objs snapshot.Objects
		if err := objs.Decode(bytes.NewReader(input), "fuzz"); err != nil {
			return // not YAML the API server would accept either
		}
		snap := objs.Build(snapshot.DefaultControllerName, nil, types.NamespacedName{Namespace: "kong", Name: "kong-proxy"}, testKong(flavor))
		before := deepCopy(snap)
		first := translate.Translate(snap, nil)
		if !reflect.DeepEqual(before, deepCopy(snap)) {
			t.Fatal("Translate modified its input")
		}
		// The second translation takes over what a Memo kept of a first,
		// and its document what an Encoder kept.
		var memo translate.Memo
		var enc declarative.Encoder
		if _, _, err := enc.MarshalSizes(memo.Translate(snap, nil).Config); err != nil {
			t.Fatal(err)
		}
		second := memo.Translate(snap, nil)
		a, err := declarative.Marshal(first.Config)
		if err != nil {
			t.Fatal(err)
		}
		b, _, err := enc.MarshalSizes(second.Config)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) || !reflect.DeepEqual(first.Status, second.Status) {
			t.Fatal("Translate is not deterministic, or a Memo or an Encoder changed its result")
		}
		// The Lua konglet sends is fixed: nothing of the objects gets in.
		if len(first.Config.Plugins) > 0 && !reflect.DeepEqual(first.Config.Plugins, hostNormalizer(t)) {
			t.Fatalf("the global plugins depend on the objects: %+v", first.Config.Plugins)
		}
		checkRouteLua(t, first.Config)
		// Whatever the input, Kong must accept the output: a bad object is
		// reported on itself, never passed on to break the whole config.
		if status, body := load(double(flavor), a); status != http.StatusCreated {
			t.Fatalf("Kong (%s) refused the translation: %d %s\n%s", flavor, status, body, a)
		}
	})
}

// deepCopy copies the objects a translation reads, keyed so that map order
// does not matter.
func deepCopy(s *snapshot.Snapshot) map[string]any {
	out := map[string]any{}
	for i, g := range s.Gateways {
		out["gateway/"+strconv.Itoa(i)] = g.DeepCopy()
	}
	for i, r := range s.HTTPRoutes {
		out["httproute/"+strconv.Itoa(i)] = r.DeepCopy()
	}
	for k, svc := range s.Services {
		out["service/"+k.String()] = jsonOf(svc)
	}
	for k, list := range s.EndpointSlices {
		for i, es := range list {
			out["slice/"+k.String()+"/"+strconv.Itoa(i)] = jsonOf(es)
		}
	}
	for k, gc := range s.GatewayClasses {
		out["class/"+k] = gc.DeepCopy()
	}
	for i, g := range s.ReferenceGrants {
		out["grant/"+strconv.Itoa(i)] = g.DeepCopy()
	}
	return out
}

// jsonOf copies konglet's own snapshot types, which have no DeepCopy: their
// fields are all exported, so the JSON holds all of them.
func jsonOf(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// doubles are the strict Kong doubles of each router flavor, made once
// per process and used in process (no server).
var (
	doublesOnce sync.Once
	doubles     map[string]*kongdouble.Double
)

func double(flavor string) *kongdouble.Double {
	doublesOnce.Do(func() {
		doubles = map[string]*kongdouble.Double{}
		for _, f := range []string{snapshot.RouterExpressions, snapshot.RouterTraditionalCompat} {
			doubles[f] = kongdouble.New(kongdouble.Options{RouterFlavor: f})
		}
	})
	return doubles[flavor]
}

// load posts a config to the double in process: the fuzzer runs it for
// every input, where a loopback round trip would dominate.
func load(kong *kongdouble.Double, doc []byte) (int, string) {
	body, _ := json.Marshal(map[string]string{"config": string(doc)})
	req := httptest.NewRequest(http.MethodPost, "/config?flatten_errors=1", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	kong.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

func declarativeJSON(res translate.Result) ([]byte, error) {
	return declarative.Marshal(res.Config)
}
