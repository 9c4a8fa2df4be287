// Package storetest runs real object stores on loopback for the tests and
// benchmarks of reading datasets from buckets: versitygw serving a
// directory as S3 (StartS3), fake-gcs-server serving one as GCS
// (StartGCS) and Azurite serving one as Azure Blob Storage (StartAzure),
// at the versions `make setup` installs into the repository's .bin. A test that needs one and finds it missing fails
// with "run make setup"; it never skips.
//
// What goes in: a directory for the store to keep its buckets in (the
// test's t.TempDir()). What comes out: the store's endpoint and
// credentials, as fields and as the environment a `stoker serve` process
// reads them from (S3.Env, GCS.Env), and helpers that put objects through
// the store's own API, so that every object has the ETag a real store
// would give it. WriteShards turns an ImageFolder (testdata/photos) into
// WebDataset tar shards, byte for byte the same on every run, so no
// binary shards need be committed.
//
// StartLyingS3 is the odd one out: a small S3 of this process that lies as
// told (oversized listings, entries without LastModified, ranges answered
// whole, no ETags, ignored If-Match, redirects to another host), for the
// tests of what a client believes of a store.
//
// Each server is a child process that dies with the test: it is killed
// and waited for in t.Cleanup, and on Linux the kernel kills it should the
// test binary die first (Pdeathsig).
package storetest
