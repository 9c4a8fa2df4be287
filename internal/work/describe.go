package work

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync/atomic"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/stoker-dev/stoker/internal/lease"
)

// Why a peer is unavailable, in words a user can act on. gRPC reports a
// failed connection as UNAVAILABLE with a message only; what failed is
// known here by type instead, from the transport credentials the peer is
// dialed with (watchedCreds): the TLS handshake's own error, or a
// connection the worker closed before its HTTP/2 preface (what a TLS
// worker does to a plaintext client).

// connOutcome is what the transport saw of a connection that failed.
type connOutcome struct {
	// handshake is the TLS handshake's error.
	handshake error
	// noPreface: the worker closed the connection, or it failed, before
	// sending a byte.
	noPreface bool
}

// connWatch keeps the outcome of the peer's last connection: nil once one
// handshakes and reads.
type connWatch struct{ last atomic.Pointer[connOutcome] }

// watchedCreds are the peer's transport credentials, reporting each
// connection's outcome to w.
type watchedCreds struct {
	credentials.TransportCredentials
	w *connWatch
}

func (c *watchedCreds) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := c.TransportCredentials.ClientHandshake(ctx, authority, raw)
	if err != nil {
		c.w.last.Store(&connOutcome{handshake: err})
		return nil, nil, err
	}
	return &watchedConn{Conn: conn, w: c.w}, info, nil
}

func (c *watchedCreds) Clone() credentials.TransportCredentials {
	return &watchedCreds{TransportCredentials: c.TransportCredentials.Clone(), w: c.w}
}

// watchedConn is a handshaken connection that reports whether the worker
// ever sent a byte on it.
type watchedConn struct {
	net.Conn
	w   *connWatch
	got atomic.Bool
}

func (c *watchedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	switch {
	case n > 0 && !c.got.Swap(true):
		c.w.last.Store(nil)
	case n == 0 && err != nil && !c.got.Load():
		c.w.last.Store(&connOutcome{noPreface: true})
	}
	return n, err
}

// describe says err in words a user can act on, keeping the gRPC error's
// message: "Unauthenticated: …", "TLS: x509: …", "decoder differs: …".
func (p *Peer) describe(err error) error {
	if err == nil || errors.Is(err, ErrDecoder) || errors.Is(err, lease.ErrDraining) {
		return err
	}
	var se interface{ GRPCStatus() *status.Status }
	if !errors.As(err, &se) {
		return err
	}
	st := se.GRPCStatus()
	msg := st.Message()
	// A connection error quotes its cause: `connection error: desc =
	// "transport: …"`.
	if i := strings.Index(msg, `desc = "`); i >= 0 {
		if inner, err := strconv.Unquote(msg[i+len(`desc = `):]); err == nil {
			msg = msg[:i] + "desc = " + inner
		}
	}
	var conn *connOutcome
	if st.Code() == codes.Unavailable {
		conn = p.watch.last.Load()
	}
	switch {
	case conn != nil && conn.handshake != nil:
		msg = "TLS: " + strings.TrimPrefix(conn.handshake.Error(), "tls: ")
	case conn != nil && conn.noPreface:
		msg = "Unavailable: " + msg + " (a TLS worker dialed in plaintext? --peer-ca)"
	default:
		msg = st.Code().String() + ": " + msg
	}
	return &described{msg: msg, err: err}
}

// described is an error said for users, wrapping the original.
type described struct {
	msg string
	err error
}

func (d *described) Error() string { return d.msg }
func (d *described) Unwrap() error { return d.err }
