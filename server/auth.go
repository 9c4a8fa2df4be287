package server

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/stoker-dev/stoker/internal/rpc"
)

// tokens is the set of bearer tokens a server accepts, replaced whole on
// reload. It holds their SHA-256 sums, compared in constant time.
type tokens struct {
	sums atomic.Pointer[[][sha256.Size]byte]
}

// readTokens reads a token file: one token per line, blank lines and lines
// starting with '#' ignored, surrounding space trimmed.
func readTokens(path string) ([][sha256.Size]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("auth tokens: %w", err)
	}
	var sums [][sha256.Size]byte
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		sums = append(sums, sha256.Sum256([]byte(line)))
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("auth tokens %s: %w", path, err)
	}
	if len(sums) == 0 {
		return nil, fmt.Errorf("auth tokens %s: no token in the file (an empty file would lock every client out)", path)
	}
	return sums, nil
}

// ReadToken reads the first token of a token file (the file a peer token
// is given in has the same format as --auth-tokens).
func ReadToken(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	for line := range strings.Lines(string(data)) {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			return line, nil
		}
	}
	return "", fmt.Errorf("token file %s: no token in it", path)
}

// ok reports whether tok is one of the tokens, and its sum. Every
// candidate is compared, so the time taken says nothing of which tokens
// exist.
func (t *tokens) ok(tok string) ([sha256.Size]byte, bool) {
	sum := sha256.Sum256([]byte(tok))
	sums := t.sums.Load()
	if sums == nil {
		return sum, false
	}
	found := 0
	for _, s := range *sums {
		found |= subtle.ConstantTimeCompare(s[:], sum[:])
	}
	return sum, found == 1
}

// ReloadTokens rereads Config.AuthTokens (on SIGHUP) and cuts the open
// streams whose token is no longer in it (UNAUTHENTICATED). On error the
// tokens in force stay, and so do the streams.
func (s *Server) ReloadTokens() error {
	if s.cfg.AuthTokens == "" {
		return nil
	}
	sums, err := readTokens(s.cfg.AuthTokens)
	if err != nil {
		return err
	}
	s.tokens.sums.Store(&sums)
	cut := s.tokenStreams.cut(sums)
	s.log.Info("auth tokens loaded", "file", s.cfg.AuthTokens, "tokens", len(sums), "streams_cut", cut)
	return nil
}

// authFree are the methods that answer without a token: health probes.
func authFree(method string) bool {
	return strings.HasPrefix(method, "/"+healthpb.Health_ServiceDesc.ServiceName+"/")
}

// authorize checks the bearer token of a call when tokens are configured.
// It returns the sum of the token the call was let in with, if any.
func (s *Server) authorize(ctx context.Context, method string) (sum [sha256.Size]byte, tokened bool, err error) {
	if s.cfg.AuthTokens == "" || authFree(method) {
		return sum, false, nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	for _, v := range md.Get("authorization") {
		if tok, ok := strings.CutPrefix(v, "Bearer "); ok {
			if sum, ok := s.tokens.ok(tok); ok {
				return sum, true, nil
			}
		}
	}
	s.refusals.refuse("unauthenticated", "call refused: missing or invalid bearer token", "method", method, "client", rpc.ClientHost(ctx))
	return sum, false, status.Error(codes.Unauthenticated, "missing or invalid bearer token (this server requires one: --auth-tokens)")
}

func (s *Server) unaryAuth(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if _, _, err := s.authorize(ctx, info.FullMethod); err != nil {
		return nil, err
	}
	resp, err := h(ctx, req)
	return resp, capStatus(err)
}

// streamAuth lets a stream in with a valid token and keeps it revocable:
// its handler sees a context that ReloadTokens cancels when the token is
// removed from the file, and the client then gets errTokenRevoked.
func (s *Server) streamAuth(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	sum, tokened, err := s.authorize(ss.Context(), info.FullMethod)
	if err != nil {
		return err
	}
	if !tokened {
		return capStatus(h(srv, ss))
	}
	ctx, cancel := context.WithCancelCause(ss.Context())
	defer cancel(nil)
	defer s.tokenStreams.add(sum, cancel)()
	err = h(srv, &revocableStream{ServerStream: ss, ctx: ctx})
	if context.Cause(ctx) == errTokenRevoked {
		s.log.Warn("stream cut: its bearer token was removed from --auth-tokens", "method", info.FullMethod, "client", rpc.ClientHost(ctx))
		return errTokenRevoked
	}
	return capStatus(err)
}

// errTokenRevoked ends the open streams of a token that a reload removed.
var errTokenRevoked = status.Error(codes.Unauthenticated,
	"this stream's bearer token was removed from the server's --auth-tokens (reloaded on SIGHUP): the stream is cut")

// revocableStream is a stream whose handler runs under ctx, which a token
// reload may cancel.
type revocableStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (r *revocableStream) Context() context.Context { return r.ctx }

// tokenStreams are the open streams let in with a token, by its sum, so
// that a reload that removes a token cuts them (a trainer whose token was
// revoked keeps no stream, nor the next epoch's it keeps open).
type tokenStreams struct {
	mu   sync.Mutex
	open map[*tokenStream]struct{}
}

type tokenStream struct {
	sum    [sha256.Size]byte
	cancel context.CancelCauseFunc
}

// add registers a stream's token and cancel; the func it returns
// forgets them.
func (t *tokenStreams) add(sum [sha256.Size]byte, cancel context.CancelCauseFunc) (remove func()) {
	ts := &tokenStream{sum: sum, cancel: cancel}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.open == nil {
		t.open = make(map[*tokenStream]struct{})
	}
	t.open[ts] = struct{}{}
	return func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		delete(t.open, ts)
	}
}

// cut cancels the streams whose token is not among sums, and returns how
// many.
func (t *tokenStreams) cut(sums [][sha256.Size]byte) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for ts := range t.open {
		if !slices.Contains(sums, ts.sum) {
			ts.cancel(errTokenRevoked)
			delete(t.open, ts)
			n++
		}
	}
	return n
}
