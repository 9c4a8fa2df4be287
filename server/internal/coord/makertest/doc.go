// Package makertest is one conformance suite for the makers a
// coordinator leases batches to (coord.Maker), run against each: the
// local executor's and a peer's over a Work stream (package server's
// tests) and a batch in parts (package coord's), as gocloud.dev's
// drivertest is run against every driver.
//
// What goes in: a Subject, a maker bound to one job (Maker) with what the
// suite must know of it: the job's batches, a reference for what each
// must hold, and a way to hold the maker's samples mid-make. What it
// checks, each in a subtest of its own on a fresh Subject: a batch is
// made whole and reuses the caller's buffer; Makes run concurrently; a
// part of a batch goes to its places and nowhere else; a Make honours its
// context, whether done before it starts or ending while its samples are
// held, and after it returns never touches the batch again; Free comes
// back to what it was once every Make has returned; Ready holds; Forget
// drops what the maker keeps of the job, which it then takes anew.
//
// It imports no coordinator (coord's own tests run it), only the lease and
// the batch, the leaves both sides share.
package makertest
