package main

import (
	"context"
	"flag"
	"fmt"
	"io"
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
		return fmt.Errorf("status %s: %w", fs.Arg(0), err)
	}
	printStatus(w, fs.Arg(0), st)
	return nil
}

func printStatus(w io.Writer, addr string, st *stokerv1.StatusResponse) {
	fmt.Fprintf(w, "%s: %d local decode goroutines, %d peers ready, %d jobs\n\n", addr, st.GetWorkers(), st.GetPeersReady(), len(st.GetJobs()))
	if len(st.GetJobs()) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "job\tdataset\trank\tepoch\timages/s\tMB/s\twait\tgpu idle\tstarved (signal)\twindow\tbuffered\tmakers (batches/s, in flight, batches/s when busy, busy)\trecommended\tadvice")
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
		fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%d\t%.0f\t%.0f\t%.1f%%\t%s\t%.1f%% (%s)\t%d [%d..%d]\t%d\t%s\t%.0f\t%s\n",
			j.GetId(), j.GetDataset(), j.GetRank(), j.GetWorldSize(), j.GetEpoch(), j.GetImagesPerSecond(), j.GetBytesPerSecond()/1e6,
			100*j.GetInputStallRatio(), gpu, 100*j.GetStarvation(), j.GetStarvationSignal(), j.GetWindow(), j.GetWindowMin(), j.GetWindowMax(), j.GetBuffered(),
			strings.Join(makers, ", "), j.GetWorkersRecommended(), j.GetAdvice())
	}
	tw.Flush()
}
