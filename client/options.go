package client

import (
	"time"

	"google.golang.org/grpc"

	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// options are a Client's settings; Option sets them.
type options struct {
	dial          []grpc.DialOption
	token         string
	insecureToken bool
	tls           *tlsFiles
}

// tlsFiles names the PEM files of WithTLS.
type tlsFiles struct {
	ca, cert, key string
}

// Option configures a Client (see New).
type Option func(*options)

// WithDialOptions adds gRPC dial options to the client's connection; they
// come after the client's own (plaintext, keepalive, the 8 MiB receive
// limit, the flow-control windows) and so win over them. Default: none.
func WithDialOptions(o ...grpc.DialOption) Option {
	return func(c *options) { c.dial = append(c.dial, o...) }
}

// WithToken sends "authorization: Bearer token" on every call. The token is
// refused over plaintext to an address that is not loopback (an error from
// New or from the call says so), unless WithInsecureToken is given too.
// Default: no token.
func WithToken(token string) Option {
	return func(c *options) { c.token = token }
}

// WithInsecureToken allows WithToken's token to travel in plaintext to any
// address (a trusted network, a TLS-terminating sidecar). Default: a token
// goes in plaintext only to loopback.
func WithInsecureToken() Option {
	return func(c *options) { c.insecureToken = true }
}

// WithTLS connects over TLS, trusting the CA certificates in the PEM file
// caFile (empty: the system's roots) and, when certFile is not empty,
// presenting the client certificate certFile with its key keyFile (mutual
// TLS). New reports unreadable or invalid files. Default: plaintext.
func WithTLS(caFile, certFile, keyFile string) Option {
	return func(c *options) { c.tls = &tlsFiles{ca: caFile, cert: certFile, key: keyFile} }
}

// loaderOptions are a Loader's settings; LoaderOption sets them.
type loaderOptions struct {
	epoch    uint64
	epochs   uint64
	prefetch uint32
	asReady  bool
	start    uint64
	skip     []uint64
	consumed uint64
	began    uint32
	timeout  time.Duration
	shm      bool
	errLimit *stokerv1.SampleErrorLimit
}

// defaultPrefetch is Prefetch's default.
const defaultPrefetch = 4

// LoaderOption configures a Loader (see Client.Loader).
type LoaderOption func(*loaderOptions)

// WithEpoch is the first epoch the loader runs. Default 0.
func WithEpoch(e uint64) LoaderOption {
	return func(o *loaderOptions) { o.epoch = e }
}

// WithEpochs is how many epochs the loader runs, one after the other on one
// stream; Next returns io.EOF after the last. Default 0: epoch after epoch
// until Close.
func WithEpochs(n uint64) LoaderOption {
	return func(o *loaderOptions) { o.epochs = n }
}

// WithPrefetch is how many batches the server may send ahead of the trainer
// (the stream's credits); values below 1 mean 1. Default 4.
func WithPrefetch(n int) LoaderOption {
	return func(o *loaderOptions) { o.prefetch = uint32(min(max(n, 1), 1<<20)) }
}

// WithAsReady has the server send each epoch's batches as they are made instead
// of in batch-number order. Default false: in order.
func WithAsReady(b bool) LoaderOption {
	return func(o *loaderOptions) { o.asReady = b }
}

// WithResume resumes the first epoch: batches before start, and those of skip
// (batch numbers past start taken already, in as-ready mode), are not sent
// again; consumed is the number of positions of the epoch's order that the
// whole job consumed before it was restarted with another world size
// (elastic resume; 0 otherwise). Default: the first epoch from its start.
func WithResume(start uint64, skip []uint64, consumed uint64) LoaderOption {
	return func(o *loaderOptions) {
		o.start, o.skip, o.consumed = start, append([]uint64(nil), skip...), consumed
	}
}

// WithEpochWorldSize is, for an elastic resume (WithResume's consumed) of a
// job with the block shuffle (JobSpec.shuffle_mode SHUFFLE_MODE_BLOCK), the
// world size the resumed epoch began with: the block shuffle gives each
// rank a contiguous span of the epoch's order, one per rank of that first
// world, and consumed counts positions taken from all spans in step, so
// every resume of the epoch names the same first world size. Default 0:
// the job's world size (right for a first resume from a run that started
// the epoch).
func WithEpochWorldSize(w uint32) LoaderOption {
	return func(o *loaderOptions) { o.began = w }
}

// WithTimeout bounds how long the stream may stay silent while Next waits: if
// no message arrives from the server for d, Next fails with
// codes.DeadlineExceeded and the loader is done. Default 0: no limit (a
// dead server is still noticed by keepalive within about 15 s).
func WithTimeout(d time.Duration) LoaderOption {
	return func(o *loaderOptions) { o.timeout = max(d, 0) }
}

// WithSharedMemory asks a server on this machine for its shared-memory ring
// (Linux): the server then writes each batch's pixels into a slot of the
// ring instead of sending them in chunks, and the loader copies them out
// and gives the slot back at once. A server on another machine, one run
// with --shm=false, or one this process cannot reach the socket of (another
// network namespace) sends chunks as usual; Transport says which. Default
// false: chunks.
func WithSharedMemory(on bool) LoaderOption {
	return func(o *loaderOptions) { o.shm = on }
}

// WithMaxSampleErrors bounds the samples of an epoch (this rank's share)
// that may fail by their own fault (files that do not decode, are missing
// or changed) before the server ends the job with codes.DataLoss, naming
// the commonest causes: more than count, and more than fraction (0..1) of
// the epoch's samples; both 0 tolerate none. It sets the JobSpec's
// MaxSampleErrors. Default: the spec's, else the server's (10, or 0.1% of
// the epoch when that is more). A batch every sample of which failed ends
// the job whatever the bound.
func WithMaxSampleErrors(count uint64, fraction float64) LoaderOption {
	return func(o *loaderOptions) { o.errLimit = &stokerv1.SampleErrorLimit{Count: count, Fraction: fraction} }
}
