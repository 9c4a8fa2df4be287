package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/stoker-dev/stoker/client"
	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// `stoker status --watch`: the server's jobs every --every, where their
// input stalls and the verdict on each. On a terminal, a frame redrawn in
// place (ANSI: cursor home, each line cleared to its end, the rest of the
// screen cleared), at most 80 columns and the terminal's height; otherwise
// plain lines, one per job per refresh, for a log. SIGINT or SIGTERM ends
// it (its context), leaving the last frame on the screen.

// watchWidth is the widest a frame is: it fits an 80-column terminal.
const watchWidth = 80

// ANSI control sequences of the frame.
const (
	ansiHome       = "\x1b[H"
	ansiClearLine  = "\x1b[K"
	ansiClearBelow = "\x1b[J"
	ansiClear      = "\x1b[2J"
	ansiHideCursor = "\x1b[?25l"
	ansiShowCursor = "\x1b[?25h"
)

// watchTerm is the terminal --watch draws on; nil for plain lines.
type watchTerm struct {
	// size is the terminal's columns and rows now (it may be resized).
	size func() (cols, rows int)
}

// watchStatus asks c for its status every `every` until ctx ends, and
// draws it on term (nil: plain lines). It returns the first call's error
// (a wrong address should not look like a server with nothing to show);
// later errors are shown and asked again.
func watchStatus(ctx context.Context, w io.Writer, c *client.Client, addr string, every, timeout time.Duration, term *watchTerm) error {
	answered := false
	if term != nil {
		fmt.Fprint(w, ansiHideCursor+ansiClear)
		defer fmt.Fprint(w, ansiShowCursor+"\n")
	}
	for {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		st, err := c.Status(cctx)
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		if err != nil && !answered {
			return fmt.Errorf("status %s: %w", addr, err)
		}
		answered = answered || err == nil
		now := time.Now()
		if term != nil {
			cols, rows := term.size()
			drawFrame(w, watchFrame(addr, st, err, now, min(cols, watchWidth)), rows)
		} else {
			for _, line := range watchLines(addr, st, err, now) {
				fmt.Fprintln(w, line)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(every):
		}
	}
}

// drawFrame writes lines in place of the last frame, at most rows-1 of
// them (the cursor's line stays free, so the screen never scrolls).
func drawFrame(w io.Writer, lines []string, rows int) {
	if rows > 1 && len(lines) > rows-1 {
		more := len(lines) - (rows - 2)
		lines = append(lines[:rows-2:rows-2], fmt.Sprintf("… %d more lines (a taller terminal shows them)", more))
	}
	var b strings.Builder
	b.WriteString(ansiHome)
	for _, l := range lines {
		b.WriteString(l)
		b.WriteString(ansiClearLine + "\n")
	}
	b.WriteString(ansiClearBelow)
	io.WriteString(w, b.String())
}

// watchFrame is one frame: a header, then each job's block; every line at
// most width runes.
func watchFrame(addr string, st *stokerv1.StatusResponse, err error, now time.Time, width int) []string {
	clock := now.Format("15:04:05")
	var lines []string
	if st != nil {
		head := fmt.Sprintf("stoker %s · %s · %d local cores · %d peers ready", addr, st.GetVersion(), st.GetWorkers(), st.GetPeersReady())
		lines = append(lines, fit(head, width-len(clock)-1)+pad(width-len(clock)-utf8.RuneCountInString(fit(head, width-len(clock)-1)))+clock)
	} else {
		lines = append(lines, fit("stoker "+addr, width-len(clock)-1)+" "+clock)
	}
	if err != nil {
		lines = append(lines, fit("no answer (asking again): "+err.Error(), width))
	}
	if st == nil {
		return lines
	}
	if len(st.GetJobs()) == 0 {
		return append(lines, "", "no jobs: waiting for a trainer")
	}
	for _, j := range st.GetJobs() {
		lines = append(lines, "")
		for _, l := range jobBlock(j) {
			lines = append(lines, fit(l, width))
		}
	}
	return lines
}

// jobBlock is one job's lines in a frame.
func jobBlock(j *stokerv1.JobStatus) []string {
	lines := []string{fmt.Sprintf("%s  epoch %d  %s img/s  %s MB/s  window %d [%d..%d]  buffered %d", j.GetId(), j.GetEpoch(),
		figure("%.0f", j.GetImagesPerSecond()), figure("%.0f", j.GetBytesPerSecond()/1e6), j.GetWindow(), j.GetWindowMin(),
		j.GetWindowMax(), j.GetBuffered())}
	if v := j.GetVerdict(); v != "" {
		lines = append(lines, "  ▶ "+v)
	}
	lines = append(lines, "  trainer  "+bar(j.GetTrainerStepRatio(), j.GetInputStallRatio(), 20)+" "+trainerFigures(j))
	if ms := j.GetMaking(); ms != nil {
		// Two lines: the local executor's stages, then the peers'.
		local, peers := stageShares(ms, makingStageNames[:4]), stageShares(ms, makingStageNames[4:])
		lines = append(lines, "  making   "+strings.Join(local, "  "),
			fmt.Sprintf("           %s  · %s s a batch, over %d", strings.Join(peers, "  "), figure("%.2f", ms.GetSecondsPerBatch()), ms.GetBatches()))
	}
	lines = append(lines, "  delivery "+deliveryFigures(j))
	for i, m := range j.GetMakers() {
		label := "  makers   "
		if i > 0 {
			label = "           "
		}
		if i == 4 && len(j.GetMakers()) > 5 {
			lines = append(lines, fmt.Sprintf("%s… %d more", label, len(j.GetMakers())-4))
			break
		}
		lines = append(lines, label+makerLine(m))
	}
	if a := j.GetAdvice(); a != "" {
		lines = append(lines, fmt.Sprintf("  advice   %s (recommended %s)", a, figure("%.0f", j.GetWorkersRecommended())))
	}
	return lines
}

// watchLines are the plain lines of one refresh: one per job.
func watchLines(addr string, st *stokerv1.StatusResponse, err error, now time.Time) []string {
	clock := now.Format(time.RFC3339)
	if err != nil {
		return []string{fmt.Sprintf("%s status %s: no answer (asking again): %v", clock, addr, err)}
	}
	if len(st.GetJobs()) == 0 {
		return []string{clock + " no jobs"}
	}
	var lines []string
	for _, j := range st.GetJobs() {
		parts := []string{fmt.Sprintf("%s %s %s", clock, j.GetId(), verdictLine(j)),
			trainerFigures(j), deliveryFigures(j)}
		if ms := j.GetMaking(); ms != nil {
			parts = append(parts, "making "+makingFigures(ms))
		}
		parts = append(parts, figure("%.0f", j.GetImagesPerSecond())+" img/s")
		lines = append(lines, strings.Join(parts, " | "))
	}
	return lines
}

// verdictLine is "bottleneck: verdict", the bottleneck first on every
// line (for grep), once: a verdict that begins "bottleneck: " already
// ("starting: no verdict ...") loses that.
func verdictLine(j *stokerv1.JobStatus) string {
	b, v := j.GetBottleneck(), j.GetVerdict()
	if b == "" {
		return v
	}
	return b + ": " + strings.TrimPrefix(v, b+": ")
}

// bar is a bar of width cells: a's share full, b's shaded, the rest
// blank.
func bar(a, b float64, width int) string {
	na := int(clamp01(a)*float64(width) + 0.5)
	nb := min(int(clamp01(b)*float64(width)+0.5), width-na)
	return "[" + strings.Repeat("█", na) + strings.Repeat("░", nb) + strings.Repeat(" ", width-na-nb) + "]"
}

func clamp01(x float64) float64 {
	if !(x > 0) {
		return 0
	}
	return min(x, 1)
}

// fit cuts s to at most width runes, with an ellipsis where it was cut.
func fit(s string, width int) string {
	if width <= 0 {
		return ""
	}
	if utf8.RuneCountInString(s) <= width {
		return s
	}
	r := []rune(s)
	return string(r[:width-1]) + "…"
}

func pad(n int) string { return strings.Repeat(" ", max(n, 1)) }
