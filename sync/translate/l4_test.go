package translate_test

import (
	"net/http"
	"slices"
	"testing"

	"github.com/konglet/konglet/sync/snapshot"
	"github.com/konglet/konglet/sync/translate"
	"github.com/konglet/konglet/test/kongdouble"
)

// TestL4Routing asks the double's stream router where connections go, for
// both router flavors.
func TestL4Routing(t *testing.T) {
	for _, flavor := range []string{snapshot.RouterExpressions, snapshot.RouterTraditionalCompat} {
		t.Run(flavor, func(t *testing.T) {
			doc, err := declarativeJSON(translate.Translate(loadSnapshot(t, flavor, "testdata/golden/l4/input.yaml"), nil))
			if err != nil {
				t.Fatal(err)
			}
			kong := kongdouble.New(kongdouble.Options{RouterFlavor: flavor, StreamListeners: []kongdouble.Listener{
				{IP: "0.0.0.0", Port: 9000}, {IP: "0.0.0.0", Port: 9001, SSL: true}, {IP: "0.0.0.0", Port: 9443, SSL: true}, {IP: "0.0.0.0", Port: 9053, UDP: true},
			}})
			defer kong.Close()
			if status, body := load(kong, doc); status != http.StatusCreated {
				t.Fatalf("Kong refused: %d %s", status, body)
			}
			db := []string{"198.18.0.1:5432", "198.18.0.2:5432"}
			weighted := []string{"198.18.0.1:5432", "198.18.0.2:5432", "198.18.1.1:443"}
			for _, c := range []struct {
				name string
				req  kongdouble.StreamRequest
				want []string // nil: no route
			}{
				{"tcp", kongdouble.StreamRequest{ListenPort: 9000}, db},
				{"passthrough exact", kongdouble.StreamRequest{ListenPort: 9001, TLS: true, SNI: "app.example.com"}, weighted},
				{"passthrough wildcard", kongdouble.StreamRequest{ListenPort: 9001, TLS: true, SNI: "a.internal.example.com"}, weighted},
				{"passthrough outside the listener hostname", kongdouble.StreamRequest{ListenPort: 9001, TLS: true, SNI: "other.org"}, nil},
				{"terminate", kongdouble.StreamRequest{ListenPort: 9443, TLS: true, SNI: "secure.example.com"}, db},
				{"udp", kongdouble.StreamRequest{ListenPort: 9053, UDP: true}, []string{"198.18.2.1:53"}},
			} {
				d, ok := kong.RouteStream(c.req)
				var got []string
				for _, target := range d.Targets {
					got = append(got, target.Target)
				}
				if ok != (c.want != nil) || !slices.Equal(got, c.want) {
					t.Errorf("%s: routed %v to %v (%s), want %v", c.name, ok, got, d.RouteName, c.want)
				}
			}
		})
	}
}
