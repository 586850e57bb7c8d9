package kongdouble_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/konglet/konglet/test/kongdouble"
)

// TestDataPlaneSNIField: for HTTP routes Kong 3.9 reads tls.sni from the
// handshake of the proxy listen (kong/router/fields.lua: ngx.ssl.server_name,
// the name as the client sent it, not lowercased), never from the Host
// header; without SNI (a client that dials an IP address) and on plain HTTP
// the field is absent, and a predicate on a missing field is false whatever
// its operator, so only a negation of one matches then (atc-router).
func TestDataPlaneSNIField(t *testing.T) {
	answer := func(msg string) any { return plugin("request-termination", M{"status_code": 200, "message": msg}) }
	d := newDouble(t, kongdouble.Options{})
	load(t, d, config(M{"services": L{svc("s", "no-backend.invalid",
		exprRoute("exact", `tls.sni == "a.example.com"`, M{"priority": 5}, answer("exact")),
		exprRoute("lower", `lower(tls.sni) == "a.example.com"`, M{"priority": 4}, answer("lower")),
		exprRoute("absent", `!(tls.sni != "") && http.path ^= "/"`, M{"priority": 3}, answer("absent")),
		exprRoute("other", `http.path ^= "/"`, M{"priority": 1}, answer("other")),
	)}}))
	dp := kongdouble.NewDataPlane(d, nil)
	t.Cleanup(dp.Close)
	secure := httptest.NewUnstartedServer(dp.Handler(8443, true))
	secure.TLS = dp.TLSConfig()
	secure.StartTLS()
	t.Cleanup(secure.Close)
	plain := httptest.NewServer(dp.Handler(8000, false))
	t.Cleanup(plain.Close)

	get := func(base, serverName, host string) string {
		t.Helper()
		c := secure.Client()
		tr := c.Transport.(*http.Transport).Clone()
		tr.TLSClientConfig.InsecureSkipVerify = true
		tr.TLSClientConfig.ServerName = serverName // "" with an IP address: no SNI
		req, _ := http.NewRequest("GET", base+"/", nil)
		req.Host = host
		res, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return string(body)
	}
	for _, c := range []struct {
		name, base, sni, host, want string
	}{
		{"SNI as sent", secure.URL, "a.example.com", "b.example.com", "exact"},
		{"SNI in capitals", secure.URL, "A.Example.COM", "a.example.com", "lower"},
		{"another SNI, the Host names the route's", secure.URL, "b.example.com", "a.example.com", "other"},
		{"no SNI", secure.URL, "", "a.example.com", "absent"},
		{"plain HTTP", plain.URL, "", "a.example.com", "absent"},
	} {
		if got := get(c.base, c.sni, c.host); !strings.Contains(got, `"`+c.want+`"`) {
			t.Errorf("%s: %s, want route %s", c.name, got, c.want)
		}
	}
}
