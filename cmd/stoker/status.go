package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/stoker-dev/stoker/client"
	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
	"github.com/stoker-dev/stoker/server"
)

// runStatus is `stoker status ADDR`: the server's jobs as a table, and the
// advisor's line for each.
func runStatus(args []string) error { return statusTo(os.Stdout, args) }

// statusTo is runStatus printing to w.
func statusTo(w io.Writer, args []string) error {
	fs := flag.NewFlagSet("status", flag.ExitOnError)
	token := fs.String("token-file", "", "file whose first token is sent (servers with --auth-tokens)")
	ca := fs.String("tls-ca", "", "PEM CA of the server's certificate (a TLS server)")
	cert := fs.String("tls-cert", "", "client certificate (mutual TLS)")
	key := fs.String("tls-key", "", "client certificate's key")
	timeout := fs.Duration("timeout", 10*time.Second, "give up after this long (with --epochs: on each status call)")
	epochs := fs.Bool("epochs", false, "instead of the table: ask again every --every and print a line each time a job ends an epoch, "+
		"\"this job would have needed N worker nodes\" (a batch job's log); until the server stops answering")
	every := fs.Duration("every", 10*time.Second, "with --epochs: how often to ask")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: stoker status [flags] ADDR   (ADDR: the server's gRPC address)")
		fs.PrintDefaults()
	}
	fs.Parse(args)
	if fs.NArg() != 1 {
		fs.Usage()
		return fmt.Errorf("status: want one ADDR")
	}
	var opts []client.Option
	if *token != "" {
		tok, err := server.ReadToken(*token)
		if err != nil {
			return err
		}
		opts = append(opts, client.WithToken(tok))
	}
	if *ca != "" || *cert != "" {
		opts = append(opts, client.WithTLS(*ca, *cert, *key))
	}
	c, err := client.New(fs.Arg(0), opts...)
	if err != nil {
		return err
	}
	defer c.Close()
	if *epochs {
		return followEpochs(cmdContext(), w, c, *every, *timeout)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	st, err := c.Status(ctx)
	if err != nil {
		// A TLS listener drops a plaintext client's connection, which gRPC
		// reports as no more than that ("error reading server preface:
		// EOF", "connection reset by peer"): say what it means.
		if *ca == "" && *cert == "" && speaksTLS(fs.Arg(0)) {
			return fmt.Errorf("status %s: the server speaks TLS: give --tls-ca (the PEM CA that signed its certificate; "+
				"and --tls-cert/--tls-key if it asks for a client certificate)", fs.Arg(0))
		}
		return fmt.Errorf("status %s: %w", fs.Arg(0), err)
	}
	printStatus(w, fs.Arg(0), st)
	return nil
}

// speaksTLS reports whether the server at addr (host:port) answers a TLS
// handshake: it completes, or the server answers with a TLS alert (one
// that wants a client certificate). Only the handshake is sent, and the
// server's certificate is not checked: the answer only names the flag to
// give. A plaintext gRPC server drops the ClientHello.
func speaksTLS(addr string) bool {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	d := tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}}}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err == nil {
		conn.Close()
		return true
	}
	var alert tls.AlertError
	return errors.As(err, &alert)
}

func printStatus(w io.Writer, addr string, st *stokerv1.StatusResponse) {
	v := st.GetVersion()
	if v == "" {
		v = "of a version that does not say it"
	}
	fmt.Fprintf(w, "%s: stoker %s, %d local decode goroutines, %d peers ready, %d jobs\n\n", addr, v, st.GetWorkers(), st.GetPeersReady(), len(st.GetJobs()))
	if len(st.GetJobs()) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "job\tdataset\tshuffle\trank\tepoch\timages/s\tMB/s\twait\tgpu idle\tstarved (signal)\twindow\tbuffered\tmakers (batches/s, in flight, batches/s when busy, busy)\trecommended\tadvice")
	for _, j := range st.GetJobs() {
		var makers []string
		for _, m := range j.GetMakers() {
			state := ""
			switch {
			case m.GetUnavailable() != "":
				state = " (" + m.GetUnavailable() + ")"
			case !m.GetReady():
				state = " down"
			}
			makers = append(makers, fmt.Sprintf("%s %.1f/%d %.1f %.0f%%%s", m.GetName(), m.GetBatchesPerSecond(), m.GetInFlight(),
				m.GetBusyBatchesPerSecond(), 100*m.GetBusyRatio(), state))
		}
		gpu := "n/a"
		if j.GetGpuIdleRatio() >= 0 {
			gpu = fmt.Sprintf("%.0f%%", 100*j.GetGpuIdleRatio())
		}
		shuffle := j.GetShuffle()
		if shuffle == "" {
			shuffle = "-" // a server that does not say
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%d\t%.0f\t%.0f\t%.1f%%\t%s\t%.1f%% (%s)\t%d [%d..%d]\t%d\t%s\t%.0f\t%s\n",
			j.GetId(), j.GetDataset(), shuffle, j.GetRank(), j.GetWorldSize(), j.GetEpoch(), j.GetImagesPerSecond(), j.GetBytesPerSecond()/1e6,
			100*j.GetInputStallRatio(), gpu, 100*j.GetStarvation(), j.GetStarvationSignal(), j.GetWindow(), j.GetWindowMin(), j.GetWindowMax(), j.GetBuffered(),
			strings.Join(makers, ", "), j.GetWorkersRecommended(), j.GetAdvice())
	}
	tw.Flush()
}
