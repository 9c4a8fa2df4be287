// Package bucket is source's object stores: S3, GCS and Azure, read
// through gocloud.dev/blob behind source.Store. Its init registers it with
// source.Open (source.RegisterRemote), so a program reads s3://, gs:// and
// azblob:// URLs by importing it; the pipeline's other packages do not,
// and link none of the three SDKs.
//
// Each provider's standard credential chain is used (environment, shared
// config files, workload identity, instance metadata); credentials are
// never logged or put in messages. An S3-compatible store is named by
// AWS_ENDPOINT_URL and addressed path-style. Every request runs under
// one source.Policy: exponential backoff with full jitter on throttling
// (503 SlowDown, 429), 5xx, resets, bodies cut short and stalls; a
// deadline per try; bounded tries; a retry budget shared by the store's
// requests. A request that gives up wraps source.ErrUnavailable and says
// what the store answered last. Every answer is checked before it is
// believed (guard.go): a listing's size and keys, a ranged read's
// Content-Range, the version a read asked for; a store that answers
// outside its protocol gets source.ErrProtocol. One conformance suite,
// TestStoreConformance, holds a directory and S3, GCS and Azure on
// servers on loopback to source.Store's contract.
package bucket
