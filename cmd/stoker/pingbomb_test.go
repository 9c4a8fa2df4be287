package main

import (
	"net"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// clientPingTimeout is the Python client's ping timeout
// (python/stoker/_channel.py: grpc.keepalive_timeout_ms and
// grpc.http2.ping_timeout_ms): a ping unanswered that long drops the
// trainer's stream.
const clientPingTimeout = 15 * time.Second

// TestPingsAnsweredInsideBomb: with every worker of the server inside the
// blur bomb (as many workers as this machine has cores, all in cgo), the
// server still answers HTTP/2 pings, each well within the client's ping
// timeout: pings are answered by the transport's goroutines, which get a
// P while the workers' threads are in C (a cgo call gives up its P), and
// a core from the OS scheduler beside them. The pings go on a raw HTTP/2
// connection, so each one's answer is timed alone.
func TestPingsAnsweredInsideBomb(t *testing.T) {
	ctx := processTest(t, 3*time.Minute)
	ds := writeDataset(t, 4, 2, 0)
	p := startServe(t, ctx, serveConfig{name: "serve", dataset: ds, workers: 2, args: noCostLimit})
	r := startBomb(t, ctx, p)
	defer r.Close()
	conn, err := net.Dial("tcp", p.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(conn, conn)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	// The server's enforcement policy (MinTime 10 s) takes a third ping
	// without a stream inside 10 s as its second strike, and closes the
	// connection at the third: three pings, back to back.
	const pings = 3
	var worst time.Duration
	for i := range pings {
		data := [8]byte{byte(i)}
		sent := time.Now()
		if err := fr.WritePing(false, data); err != nil {
			t.Fatal(err)
		}
		conn.SetReadDeadline(sent.Add(clientPingTimeout))
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				t.Fatalf("ping %d: no answer within the client's ping timeout %v: %v", i, clientPingTimeout, err)
			}
			switch f := f.(type) {
			case *http2.SettingsFrame:
				if !f.IsAck() {
					fr.WriteSettingsAck()
				}
				continue
			case *http2.PingFrame:
				if !f.IsAck() || f.Data != data {
					continue
				}
			default:
				continue
			}
			break
		}
		worst = max(worst, time.Since(sent))
	}
	t.Logf("%d pings answered with both workers in the bomb; worst %v", pings, worst)
}
