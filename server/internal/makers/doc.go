// Package makers is what makes a server's batches besides its peers: the
// local executor's maker (Local) and each job's queue on the executor
// (ExecJob, which a Work stream's jobs use too), the stall schedule that
// shares the executor's cores between those queues (Shares), what a
// batch's failure says when its store was at fault, and the verifier that
// re-makes a share of peers' samples and quarantines a peer whose batches
// differ (Verifier).
//
// It takes jobs as server/internal/job makes them and gives the
// coordinator (server/internal/coord) its Maker and Verifier; it imports
// nothing of the server.
package makers
