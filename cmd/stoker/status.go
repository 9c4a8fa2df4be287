package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/stoker-dev/stoker/client"
	"github.com/stoker-dev/stoker/internal/helptext"
	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
	"github.com/stoker-dev/stoker/server"
)

// defaultStatusAddr is the address `stoker status` asks without an ADDR:
// stoker serve's default --listen.
const defaultStatusAddr = "127.0.0.1:7070"

// runStatus is `stoker status [ADDR]`: the server's jobs as a table, and
// the advisor's line for each.
func runStatus(args []string) error { return statusTo(os.Stdout, args) }

// statusTo is runStatus printing to w.
func statusTo(w io.Writer, args []string) error {
	fs := flag.NewFlagSet("status", flag.ExitOnError)
	token := fs.String("token-file", "", "file whose first token is sent (servers with --auth-tokens)")
	ca := fs.String("tls-ca", "", "PEM CA of the server's certificate (a TLS server)")
	cert := fs.String("tls-cert", "", "client certificate (mutual TLS)")
	key := fs.String("tls-key", "", "client certificate's key")
	timeout := fs.Duration("timeout", 10*time.Second, "give up after this long (with --epochs or --watch: on each status call)")
	epochs := fs.Bool("epochs", false, "instead of the table: ask again every --every and print a line each time a job ends an epoch, "+
		"\"this job would have needed N worker nodes\" (a batch job's log); until the server stops answering")
	watch := fs.Bool("watch", false, "instead of the table: each job's verdict and where its input stalls, every --every,\n"+
		"redrawn in place on a terminal (80 columns), a line per job otherwise; until Ctrl-C")
	every := fs.Duration("every", 0, "with --epochs or --watch: how often to ask (default 10s with --epochs, 1s with --watch)")
	fs.Usage = helptext.Usage(fs, helptext.Head("status", "[flags] [ADDR]",
		"Prints a server's jobs: images/s, stall, window, makers, the verdict and its advice. ADDR is the server's gRPC address; default "+
			defaultStatusAddr+", where stoker serve listens by default; a host without a port is on port 7070."))
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	addr := defaultStatusAddr
	switch fs.NArg() {
	case 0:
	case 1:
		addr = fs.Arg(0)
	default:
		return fmt.Errorf("status: want one ADDR, got %d: %s (stoker status --help for the flags)", fs.NArg(), strings.Join(fs.Args(), " "))
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
	c, err := client.New(addr, opts...)
	if err != nil {
		return err
	}
	defer c.Close()
	addr = c.Target() // with the port a host alone is given
	switch {
	case *epochs && *watch:
		return errors.New("status: --epochs and --watch are two views: give one")
	case *every < 0:
		return fmt.Errorf("status: --every %v: want a positive interval", *every)
	case *epochs:
		return followEpochs(cmdContext(), w, c, cmp.Or(*every, 10*time.Second), *timeout)
	case *watch:
		var term *watchTerm
		if f, ok := w.(*os.File); ok {
			term = terminal(f)
		}
		return watchStatus(cmdContext(), w, c, addr, cmp.Or(*every, time.Second), *timeout, term)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	st, err := c.Status(ctx)
	if err != nil {
		// A TLS listener drops a plaintext client's connection, which gRPC
		// reports as no more than that ("error reading server preface:
		// EOF", "connection reset by peer"): say what it means.
		if *ca == "" && *cert == "" && speaksTLS(addr) {
			return fmt.Errorf("status %s: the server speaks TLS: give --tls-ca (the PEM CA that signed its certificate; "+
				"and --tls-cert/--tls-key if it asks for a client certificate)", addr)
		}
		return fmt.Errorf("status %s: %w", addr, err)
	}
	printStatus(w, addr, st)
	printWhere(w, st)
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
	fmt.Fprintln(tw, "job\tdataset\tshuffle\trank\tepoch\timages/s\tMB/s\twait\tgpu idle\tstarved (signal)\twindow\tbuffered\tcpu/sample (model, worst, measured)\tmakers (batches/s, in flight, batches/s when busy, busy)\trecommended\tadvice")
	for _, j := range st.GetJobs() {
		var makers []string
		for _, m := range j.GetMakers() {
			state := ""
			switch {
			case m.GetUnavailable() != "":
				state = " (" + m.GetUnavailable() + ")"
			case !m.GetReady():
				state = " down"
			case m.GetBackoffSeconds() > 0:
				state = fmt.Sprintf(" (backed off %s: %d slow or failed leases in a row)",
					time.Duration(m.GetBackoffSeconds()*float64(time.Second)).Round(time.Millisecond), m.GetFailuresInARow())
			}
			makers = append(makers, fmt.Sprintf("%s %s/%d %s %s%s", m.GetName(), figure("%.1f", m.GetBatchesPerSecond()), m.GetInFlight(),
				figure("%.1f", m.GetBusyBatchesPerSecond()), figure("%.0f%%", 100*m.GetBusyRatio()), state))
		}
		gpu := "n/a"
		if j.GetGpuIdleRatio() >= 0 {
			gpu = figure("%.0f%%", 100*j.GetGpuIdleRatio())
		}
		shuffle := j.GetShuffle()
		if shuffle == "" {
			shuffle = "-" // a server that does not say
		}
		cpu := "-" // a server that does not say
		if p := j.GetPredictedCpuSecondsPerSample(); p > 0 {
			measured := "—"
			if m := j.GetCpuSecondsPerSample(); m > 0 {
				measured = cpuFigure(m)
			}
			cpu = fmt.Sprintf("%s, %s, %s", cpuFigure(p), cpuFigure(j.GetWorstCpuSecondsPerSample()), measured)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%d\t%s\t%s\t%s\t%s\t%s (%s)\t%d [%d..%d]\t%d\t%s\t%s\t%s\t%s\n",
			j.GetId(), j.GetDataset(), shuffle, j.GetRank(), j.GetWorldSize(), j.GetEpoch(), figure("%.0f", j.GetImagesPerSecond()),
			figure("%.0f", j.GetBytesPerSecond()/1e6), figure("%.1f%%", 100*j.GetInputStallRatio()), gpu,
			figure("%.1f%%", 100*j.GetStarvation()), j.GetStarvationSignal(), j.GetWindow(), j.GetWindowMin(), j.GetWindowMax(),
			j.GetBuffered(), cpu, strings.Join(makers, ", "), figure("%.0f", j.GetWorkersRecommended()), j.GetAdvice())
	}
	tw.Flush()
}

// cpuFigure is seconds of CPU as status shows them: milliseconds, 3
// significant digits.
func cpuFigure(sec float64) string {
	if math.IsNaN(sec) || math.IsInf(sec, 0) {
		return "—"
	}
	ms := sec * 1e3
	switch {
	case ms >= 100:
		return fmt.Sprintf("%.0fms", ms)
	case ms >= 10:
		return fmt.Sprintf("%.1fms", ms)
	}
	return fmt.Sprintf("%.2fms", ms)
}

// figure formats v, or "—" while there is no figure yet: the server
// sends NaN for what it has not measured (a job that is starting has no
// worker recommendation), which a reader should not see as "NaN".
func figure(format string, v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "—"
	}
	return fmt.Sprintf(format, v)
}
