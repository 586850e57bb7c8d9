package reconcile

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/konglet/konglet/proxy/declarative"
	"github.com/konglet/konglet/sync/snapshot"
	"github.com/konglet/konglet/sync/translate"
)

// Budget bounds the configuration document. Kong's admin API refuses a body
// above its limit as a whole, so without a budget one route written to
// expand (many long matches on many listeners) would stop every load for
// everyone; with it, routes are left out, each told why, and the rest loads.
type Budget struct {
	// Total is the largest document sent (--max-config-bytes); 0: no limit.
	Total int
	// PerObject is the largest share one route may take, even when the
	// document fits (--max-object-config-bytes); 0: no limit.
	PerObject int
}

// share is what one route adds to the document.
type share struct {
	ref     translate.ObjectRef
	size    int
	created time.Time
}

// leaveOut picks the routes to leave out so that a document of fixed bytes
// plus the shares fits: every route above PerObject, then, while it does not
// fit, the largest route of the namespace whose routes take the most.
// Choosing by namespace rather than by route or by age means that a tenant
// who makes routes large, split over many routes or not, or who was there
// first, is cut before any other tenant that takes less; ties go to the
// newest route, so the order is the same on every replica. When leaving out
// every route would not make it fit, the rest is not the routes' doing and
// none is cut for it.
func (b Budget) leaveOut(fixed int, shares []share) map[translate.ObjectRef]refusal {
	out := map[translate.ObjectRef]refusal{}
	total := fixed
	byNamespace := map[string][]share{}
	used := map[string]int{}
	for _, s := range shares {
		if b.PerObject > 0 && s.size > b.PerObject {
			out[s.ref] = refusal{size: s.size, message: fmt.Sprintf(
				"left out of Kong's configuration: it would take %d bytes of it, above the %d bytes one object may take (--max-object-config-bytes)",
				s.size, b.PerObject)}
			continue
		}
		total += s.size
		byNamespace[s.ref.Namespace] = append(byNamespace[s.ref.Namespace], s)
		used[s.ref.Namespace] += s.size
	}
	if b.Total <= 0 || total <= b.Total || fixed > b.Total {
		return out
	}
	for _, list := range byNamespace {
		slices.SortFunc(list, func(a, b share) int {
			return cmp.Or(cmp.Compare(b.size, a.size), b.created.Compare(a.created), cmp.Compare(a.ref.Name, b.ref.Name), cmp.Compare(a.ref.Kind, b.ref.Kind))
		})
	}
	for total > b.Total {
		ns := ""
		for n, u := range used {
			if ns == "" || u > used[ns] || u == used[ns] && n < ns {
				ns = n
			}
		}
		s := byNamespace[ns][0]
		byNamespace[ns] = byNamespace[ns][1:]
		if used[ns] -= s.size; len(byNamespace[ns]) == 0 {
			delete(used, ns)
		}
		total -= s.size
		out[s.ref] = refusal{size: s.size, message: fmt.Sprintf(
			"left out of Kong's configuration: it would take %d bytes of it, and the configuration would be above the %d bytes Kong takes (--max-config-bytes); the largest routes of the namespace whose routes take the most are left out first",
			s.size, b.Total)}
	}
	return out
}

// maxServicesPerRoute bounds the Kong services of one route: one per rule,
// and the CRDs of every route kind allow at most 16 rules.
const maxServicesPerRoute = 16

// fitBudget leaves routes out of the configuration, or lets them back in,
// so that the document fits the budget, and tells whether that changed
// anything (then the caller translates again). While the document fits, no
// route is left out and no service is large enough for a route to pass
// PerObject, it costs one pass over the service sizes: summing them per
// route would add a tenth to a sync of 10k routes.
//
// A route's share includes the CA certificates its services verify
// backends with (BackendTLSPolicy), each counted whole in every route that
// uses it: a tenant's large CA bundles are theirs to pay for, and counting
// a shared one more than once can leave out more than needed, never too
// little.
func (l *Loop) fitBudget(snap *snapshot.Snapshot, cfg *declarative.Config, doc []byte, serviceSizes []int) bool {
	b := l.opts.Budget
	caSizes := make(map[string]int, len(cfg.CACertificates))
	caBytes := 0
	for _, ca := range cfg.CACertificates {
		caSizes[ca.ID] = declarative.CACertificateSize(ca)
		caBytes += caSizes[ca.ID]
	}
	if b.clearlyFits(len(doc), serviceSizes, caBytes) && !l.refusals.overBudget() {
		return false
	}
	sizes := map[translate.ObjectRef]int{}
	fixed := len(doc)
	type routeCA struct {
		route translate.ObjectRef
		id    string
	}
	counted := map[routeCA]bool{}
	attributed := map[string]bool{}
	for i, svc := range cfg.Services {
		ref, ok := translate.RefFromTags(svc.Tags)
		if !ok {
			continue
		}
		sizes[ref] += serviceSizes[i]
		fixed -= serviceSizes[i]
		for _, id := range svc.CACertificates {
			if !counted[routeCA{ref, id}] {
				counted[routeCA{ref, id}] = true
				sizes[ref] += caSizes[id]
			}
			if !attributed[id] {
				attributed[id] = true
				fixed -= caSizes[id]
			}
		}
	}
	// Routes left out earlier count with their size then, to see whether
	// they fit again.
	for ref, r := range l.refusals {
		if r.size > 0 {
			sizes[ref] = r.size
		}
	}
	shares := make([]share, 0, len(sizes))
	for ref, size := range sizes {
		s := share{ref: ref, size: size}
		if obj := snap.Object(ref.Kind, ref.Namespace, ref.Name); obj != nil {
			s.created = obj.GetCreationTimestamp().Time
		}
		shares = append(shares, s)
	}
	return l.refusals.setOverBudget(snap, b.leaveOut(fixed, shares))
}

// clearlyFits tells, without summing per route, that a document fits and
// no route in it can be above PerObject (even with every CA certificate of
// the document, caBytes).
func (b Budget) clearlyFits(docLen int, serviceSizes []int, caBytes int) bool {
	if b.Total > 0 && docLen > b.Total {
		return false
	}
	if b.PerObject <= 0 || docLen <= b.PerObject {
		return true
	}
	largest := 0
	for _, n := range serviceSizes {
		largest = max(largest, n)
	}
	return maxServicesPerRoute*largest+caBytes <= b.PerObject
}

// overBudget tells whether any route is left out for the budget.
func (r refusals) overBudget() bool {
	for _, v := range r {
		if v.size > 0 {
			return true
		}
	}
	return false
}

// setOverBudget makes the routes left out for the budget those of out, and
// tells whether any of them or their messages changed.
func (r refusals) setOverBudget(snap *snapshot.Snapshot, out map[translate.ObjectRef]refusal) bool {
	changed := false
	for ref, v := range r {
		if _, still := out[ref]; v.size > 0 && !still {
			delete(r, ref)
			changed = true
		}
	}
	for ref, v := range out {
		old, known := r[ref]
		if known && old.size == 0 {
			continue // Kong refused it: it is not in the document anyway
		}
		if !known || old.message != v.message {
			v.version, v.announced = version(snap, ref), true
			r[ref] = v
			changed = true
		}
	}
	return changed
}
