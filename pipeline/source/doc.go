// Package source is where a dataset's bytes come from: a local directory
// or an object-storage prefix (s3://bucket/prefix, gs://bucket/prefix,
// azblob://container/prefix), behind one Store interface.
//
// What goes in: a URL or a path (Open), and Objects as they were listed or
// indexed (key, size, and the version the store gives: an S3 or Azure
// ETag, a GCS generation). What comes out: exactly the bytes of the
// indexed version of an object, or an error; never another version's
// bytes. A read asks the store for the indexed version (If-Match, a GCS
// generation) and checks what it got (size, version), so an object
// replaced or removed after indexing is an error wrapping ErrChanged that
// names it. Every kind of Store keeps the same contract (source.go), and
// one conformance suite, TestStoreConformance, holds each to it: a
// directory, and S3, GCS and Azure on servers on loopback.
//
// Open reaches object stores through package bucket (source/bucket),
// which registers itself in its init: a program that reads object stores
// imports it (stoker's server does), and one that reads only directories
// links none of the stores' SDKs. Every remote request runs under one
// retry Policy, and Metrics (NewMetrics) count requests by outcome,
// retries, throttles, bytes and latency.
//
// Datasets read samples as byte Ranges through a Ranges: Direct reads
// each when asked; a Fetcher reads the ranges it is told of ahead
// (Prefetch), within bounds on requests in flight and on bytes held (a
// Budget), coalescing ranges of one object into one request, and answers
// from a Cache (memory, and a directory on disk) keyed by the object's
// version, so a dataset that fits is read from its store once.
package source
