// Package faultproxy is an HTTP proxy on a loopback port that stands
// between a client and an S3-compatible store and breaks some of the
// requests on purpose, for the tests and benchmarks of reading datasets
// from buckets: throttling (503 SlowDown, 429), server errors (500),
// connection resets, stalls, truncated bodies, and latency added to every
// request.
//
// What goes in: the store's endpoint, a seed and a Plan (each fault's rate
// per request, which requests faults may hit, latency). The client talks
// to Proxy.URL as if it were the store. Requests go to the store unchanged,
// with the Host header the client sent, so the SigV4 signature (which signs
// the Host) still holds (TargetHost sends the store's own instead, for a
// GCS emulator that routes by Host). What comes out: the store's answers, except for
// the requests the plan breaks, and Stats (requests seen, faults injected
// by kind). The plan can change at any time (SetPlan), for example to take
// the store down (Plan.Down) and bring it back.
//
// Faults are drawn from a generator seeded with the seed, one draw per
// request the plan's Only selects while it has rates, so the same requests
// in the same order meet the same faults. A client that replays requests
// changes that order: net/http resends an idempotent request whose reused
// connection was reset before any answer, so a Reset the proxy counts may
// reach the client as the next draw's outcome (tests that match faults to
// errors one for one give each request its own connection). Requests are addressed path-style
// (http://proxy/bucket/key), as every client of an endpoint-URL store is.
package faultproxy
