package faultproxy

import (
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Kind is a kind of fault.
type Kind int

// The faults. A status fault answers without asking the store; the body
// faults ask it and break its answer.
const (
	// None is no fault: the request goes to the store.
	None Kind = iota
	// SlowDown answers 503 with S3's SlowDown error, its throttling.
	SlowDown
	// TooManyRequests answers 429 with the error code TooManyRequests, the
	// throttling of other S3-compatible stores and of GCS.
	TooManyRequests
	// InternalError answers 500 with S3's InternalError.
	InternalError
	// Reset resets the connection (TCP RST) before any answer.
	Reset
	// Stall holds the request before asking the store: until the client
	// gives up, the proxy closes, or Plan.StallFor passes, after which the
	// request goes on (a slow answer, not a failed one). A client that
	// gives up on a request with a body (a PUT) is not noticed until the
	// proxy reads it, so that one is held until StallFor or Close.
	Stall
	// Truncate sends the store's status, headers (with their
	// Content-Length) and half of the body, then closes the connection.
	Truncate
	// StallBody sends the store's status, headers and half of the body,
	// then holds: until the client gives up, the proxy closes, or
	// Plan.StallFor passes, after which it closes the connection.
	StallBody

	numKinds
)

var kindNames = [numKinds]string{"none", "slowdown", "429", "500", "reset", "stall", "truncate", "stall-body"}

// String names the kind: none, slowdown, 429, 500, reset, stall, truncate,
// stall-body.
func (k Kind) String() string {
	if k < 0 || k >= numKinds {
		return fmt.Sprintf("Kind(%d)", int(k))
	}
	return kindNames[k]
}

// Kinds lists every fault kind (None left out).
func Kinds() []Kind {
	ks := make([]Kind, 0, numKinds-1)
	for k := None + 1; k < numKinds; k++ {
		ks = append(ks, k)
	}
	return ks
}

// Plan says which requests meet which faults.
type Plan struct {
	// Rates is each fault kind's probability per request that Only
	// selects; they sum to at most 1, and the rest of the requests go to
	// the store untouched. Nil: no faults.
	Rates map[Kind]float64
	// Down, when not None, is the fault every request that Only selects
	// meets, whatever Rates say: a store that stays down.
	Down Kind
	// Only selects the requests faults may hit; nil selects all. GETs and
	// ObjectGETs are two; a test writes its own to spare, say, a manifest.
	Only func(*http.Request) bool
	// Latency is added to every request, selected or not, before anything
	// else happens to it: the round trip to a store in another place.
	Latency time.Duration
	// StallFor bounds Stall and StallBody; 0 holds until the client gives up
	// or the proxy closes.
	StallFor time.Duration
}

// plan is a checked Plan, with the rates in kind order.
type plan struct {
	rates    [numKinds]float64
	anyRate  bool
	down     Kind
	only     func(*http.Request) bool
	latency  time.Duration
	stallFor time.Duration
}

func (pl Plan) check() (*plan, error) {
	p := &plan{down: pl.Down, only: pl.Only, latency: pl.Latency, stallFor: pl.StallFor}
	if pl.Down < None || pl.Down >= numKinds {
		return nil, fmt.Errorf("faultproxy: Down is %v, not a fault kind", pl.Down)
	}
	if pl.Latency < 0 || pl.StallFor < 0 {
		return nil, fmt.Errorf("faultproxy: negative Latency (%v) or StallFor (%v)", pl.Latency, pl.StallFor)
	}
	sum := 0.0
	for k, r := range pl.Rates {
		if k <= None || k >= numKinds {
			return nil, fmt.Errorf("faultproxy: a rate for %v, which is not a fault kind", k)
		}
		if !(r >= 0 && r <= 1) {
			return nil, fmt.Errorf("faultproxy: %v's rate is %v, not in [0, 1]", k, r)
		}
		p.rates[k] = r
		p.anyRate = p.anyRate || r > 0
		sum += r
	}
	if sum > 1+1e-9 {
		return nil, fmt.Errorf("faultproxy: the rates sum to %v, over 1", sum)
	}
	return p, nil
}

// GETs selects GET requests: object reads and listings.
func GETs(r *http.Request) bool { return r.Method == http.MethodGet }

// ObjectGETs selects GET requests of an object (a key in the path), not
// listings, so faults hit reads of data and leave listing alone.
func ObjectGETs(r *http.Request) bool {
	_, key := Key(r)
	return r.Method == http.MethodGet && key != ""
}

// Key splits a path-style request's path into its bucket and object key
// (either may be empty), for a Plan.Only of a test's own.
func Key(r *http.Request) (bucket, key string) {
	bucket, key, _ = strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	return bucket, key
}
