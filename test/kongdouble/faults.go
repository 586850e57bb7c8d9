package kongdouble

import (
	"net/http"
	"strings"
)

// faults are the failures a test can inject.
type faults struct {
	refused    []refusal
	failStatus int
	failCount  int
	down       bool
}

// RefuseEntity makes every POST /config that contains the entity (e.g.
// "route", "foo"; the plural type works too) fail with a 400 carrying an
// entity error "refused by test" for it. Entities are matched by name
// (targets by target, consumers by username, certificates by id).
func (d *Double) RefuseEntity(entityType, name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.faults.refused = append(d.faults.refused, refusal{entityType: entityType, name: name})
}

// FailNext makes the next n POST /config answer status with Kong's body for
// it (429 also sets Retry-After: 1) without loading anything.
func (d *Double) FailNext(status int, n int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.faults.failStatus, d.faults.failCount = status, n
}

// SetDown makes the admin API close every connection without answering
// (and count nothing) while down.
func (d *Double) SetDown(down bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.faults.down = down
}

// ClearFaults removes every injected fault.
func (d *Double) ClearFaults() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.faults = faults{}
}

func (d *Double) isDown() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.faults.down
}

// takeFailure consumes one injected failure; the caller holds d.mu.
func (f *faults) takeFailure() (int, bool) {
	if f.failCount <= 0 {
		return 0, false
	}
	f.failCount--
	return f.failStatus, true
}

// failureMessages are the answers of kong/api/routes/config.lua.
var failureMessages = map[int]string{
	http.StatusTooManyRequests:       "Currently loading previous configuration",
	http.StatusGatewayTimeout:        "Timed out while loading configuration",
	http.StatusServiceUnavailable:    "Kong currently exiting",
	http.StatusRequestEntityTooLarge: `Configuration does not fit in LMDB database, consider raising the "lmdb_map_size" config for Kong`,
	http.StatusInternalServerError:   "An unexpected error occurred",
}

func writeFailure(w http.ResponseWriter, status int) {
	msg, ok := failureMessages[status]
	if !ok {
		msg = http.StatusText(status)
	}
	if status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, status, message(msg))
}

// hangUp closes the connection without writing a response, like a Kong
// that is not there.
func hangUp(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	_ = conn.Close()
}

func refusalMatches(r refusal, entity string) bool {
	return r.entityType == entity || strings.TrimSuffix(entity, "s") == r.entityType
}
