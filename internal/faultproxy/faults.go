package faultproxy

import (
	"encoding/xml"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

// errorBodies are the status faults' answers, as S3 words them.
var errorBodies = map[Kind]struct {
	status        int
	code, message string
}{
	SlowDown:        {http.StatusServiceUnavailable, "SlowDown", "Please reduce your request rate."},
	TooManyRequests: {http.StatusTooManyRequests, "TooManyRequests", "Too many requests, please slow down."},
	InternalError:   {http.StatusInternalServerError, "InternalError", "We encountered an internal error. Please try again."},
}

// requestIDs numbers the proxy's own answers, for their x-amz-request-id.
var requestIDs atomic.Int64

// s3Error is S3's XML error document.
type s3Error struct {
	XMLName   xml.Name `xml:"Error"`
	Code      string
	Message   string
	Resource  string
	RequestID string `xml:"RequestId"`
}

// writeError answers with kind's status and S3 error document (no body to
// a HEAD, as S3 sends none).
func writeError(w http.ResponseWriter, r *http.Request, kind Kind) {
	e := errorBodies[kind]
	id := "FAULTPROXY" + strconv.FormatInt(requestIDs.Add(1), 10)
	body, _ := xml.Marshal(s3Error{Code: e.code, Message: e.message, Resource: r.URL.Path, RequestID: id})
	body = append([]byte(xml.Header), body...)
	h := w.Header()
	h.Set("Content-Type", "application/xml")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("X-Amz-Request-Id", id)
	w.WriteHeader(e.status)
	if r.Method != http.MethodHead {
		w.Write(body)
	}
}

// reset closes the client's connection with a TCP RST: SO_LINGER 0 drops
// what is unsent and resets instead of the orderly FIN.
func reset(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler) // cannot hijack: at least close it
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	conn.Close()
}

// bodyFault is a body fault's plan, carried by the request's context from
// ServeHTTP to breakBody.
type bodyFault struct {
	kind     Kind
	stallFor time.Duration
}

type bodyFaultKey struct{}

// errResetInstead has upstreamError reset the connection: a body fault
// meets an answer with no body to break.
var errResetInstead = errors.New("faultproxy: no body to break, resetting instead")

// errCut ends a broken body: the reverse proxy then aborts the response,
// and the server closes the connection.
var errCut = errors.New("faultproxy: body cut")

// breakBody lets half of the store's body through, then holds it (for
// StallBody) and cuts it. An answer without a body to break (to a HEAD,
// empty, or of unknown length) gets a reset instead, so the fault is one
// the client sees.
func (p *Proxy) breakBody(resp *http.Response) error {
	f, ok := resp.Request.Context().Value(bodyFaultKey{}).(bodyFault)
	if !ok {
		return nil
	}
	if resp.Request.Method == http.MethodHead || resp.ContentLength < 2 {
		p.count(Reset)
		return errResetInstead
	}
	p.count(f.kind)
	b := &cutBody{rc: resp.Body, left: resp.ContentLength / 2}
	if f.kind == StallBody {
		ctx := resp.Request.Context()
		b.hold = func() { p.hold(ctx, f.stallFor) }
	}
	resp.Body = b
	return nil
}

// cutBody reads left bytes of rc, then calls hold (if any) and fails.
type cutBody struct {
	rc   io.ReadCloser
	left int64
	hold func()
}

func (b *cutBody) Read(buf []byte) (int, error) {
	if b.left <= 0 {
		if b.hold != nil {
			b.hold()
			b.hold = nil
		}
		return 0, errCut
	}
	if int64(len(buf)) > b.left {
		buf = buf[:b.left]
	}
	n, err := b.rc.Read(buf)
	b.left -= int64(n)
	if err == io.EOF {
		err = errCut // shorter than it said: cut all the same
	}
	return n, err
}

func (b *cutBody) Close() error { return b.rc.Close() }
