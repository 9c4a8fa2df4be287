package rpc

import (
	"context"
	"fmt"
	"net"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
)

// TokenCredentials sends "authorization: Bearer token" on every call to
// target, on a trainer's connection (client.WithToken) and a coordinator's to its
// peers. Over a connection without TLS the token goes only to a loopback
// target, or anywhere when allowPlaintext.
func TokenCredentials(token, target string, allowPlaintext bool) credentials.PerRPCCredentials {
	return bearer{token: token, target: target, plainOK: allowPlaintext || IsLoopback(target)}
}

// bearer is TokenCredentials' per-call credentials.
type bearer struct {
	token, target string
	plainOK       bool // loopback, or WithInsecureToken
}

// GetRequestMetadata is the authorization header, refused over an insecure
// transport unless plainOK.
func (b bearer) GetRequestMetadata(ctx context.Context, _ ...string) (map[string]string, error) {
	if !b.plainOK {
		ri, _ := credentials.RequestInfoFromContext(ctx)
		if credentials.CheckSecurityLevel(ri.AuthInfo, credentials.PrivacyAndIntegrity) != nil {
			return nil, status.Error(codes.Unauthenticated, ErrPlainToken(b.target).Error())
		}
	}
	return map[string]string{"authorization": "Bearer " + b.token}, nil
}

// RequireTransportSecurity is false: GetRequestMetadata decides, so that
// loopback and WithInsecureToken may go in plaintext.
func (b bearer) RequireTransportSecurity() bool { return false }

// ErrPlainToken is the refusal to send a token in plaintext to target.
func ErrPlainToken(target string) error {
	return fmt.Errorf("refusing to send the bearer token in plaintext to %s, which is not a loopback address: use WithTLS, or WithInsecureToken on a trusted network", target)
}

// IsLoopback reports whether every address target names is on this
// machine: a loopback IP, "localhost", or a Unix socket. Names that need
// resolving otherwise count as remote.
func IsLoopback(target string) bool {
	endpoint := target
	if scheme, rest, ok := strings.Cut(target, ":"); ok {
		switch scheme {
		case "unix", "unix-abstract":
			return true
		case "dns", "passthrough":
			// scheme://authority/endpoint
			rest = strings.TrimPrefix(rest, "//")
			if _, ep, ok := strings.Cut(rest, "/"); ok {
				endpoint = ep
			} else {
				return false
			}
		case "ipv4", "ipv6":
			for _, a := range strings.Split(rest, ",") {
				if !loopbackHost(a) {
					return false
				}
			}
			return true
		}
	}
	return loopbackHost(endpoint)
}

// loopbackHost reports whether a "host:port" or "host" is on loopback.
func loopbackHost(addr string) bool {
	host := addr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
