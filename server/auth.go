package server

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"os"
	"strings"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
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

// ok reports whether tok is one of the tokens. Every candidate is compared,
// so the time taken says nothing of which tokens exist.
func (t *tokens) ok(tok string) bool {
	sums := t.sums.Load()
	if sums == nil {
		return false
	}
	sum := sha256.Sum256([]byte(tok))
	found := 0
	for _, s := range *sums {
		found |= subtle.ConstantTimeCompare(s[:], sum[:])
	}
	return found == 1
}

// ReloadTokens rereads Config.AuthTokens (on SIGHUP). On error the tokens
// in force stay.
func (s *Server) ReloadTokens() error {
	if s.cfg.AuthTokens == "" {
		return nil
	}
	sums, err := readTokens(s.cfg.AuthTokens)
	if err != nil {
		return err
	}
	s.tokens.sums.Store(&sums)
	s.log.Info("auth tokens loaded", "file", s.cfg.AuthTokens, "tokens", len(sums))
	return nil
}

// authFree are the methods that answer without a token: health probes.
func authFree(method string) bool {
	return strings.HasPrefix(method, "/"+healthpb.Health_ServiceDesc.ServiceName+"/")
}

// authorize checks the bearer token of a call when tokens are configured.
func (s *Server) authorize(ctx context.Context, method string) error {
	if s.cfg.AuthTokens == "" || authFree(method) {
		return nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	for _, v := range md.Get("authorization") {
		if tok, ok := strings.CutPrefix(v, "Bearer "); ok && s.tokens.ok(tok) {
			return nil
		}
	}
	s.refusals.refuse("unauthenticated", "call refused: missing or invalid bearer token", "method", method, "client", clientHost(ctx))
	return status.Error(codes.Unauthenticated, "missing or invalid bearer token (this server requires one: --auth-tokens)")
}

func (s *Server) unaryAuth(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if err := s.authorize(ctx, info.FullMethod); err != nil {
		return nil, err
	}
	resp, err := h(ctx, req)
	return resp, capStatus(err)
}

func (s *Server) streamAuth(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	if err := s.authorize(ss.Context(), info.FullMethod); err != nil {
		return err
	}
	return capStatus(h(srv, ss))
}
