package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stoker-dev/stoker/bench"
	"github.com/stoker-dev/stoker/client"
	"github.com/stoker-dev/stoker/internal/storetest"
	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
)

const sbatchScript = "../../deploy/slurm/stoker.sbatch"

// TestSlurmScript checks deploy/slurm/stoker.sbatch's functions without
// Slurm: bash parses it; sourced with the job's variables set, a stub
// scontrol on PATH, two of four workers' address files written and one
// worker's exit status, its peer list is those two nodes on the ports
// they wrote, the exited one is named failed and the fourth pending, and
// both `stoker serve` command lines parse with serve's own flag set and
// serve DATA, a directory or a bucket's URL.
func TestSlurmScript(t *testing.T) {
	script, err := filepath.Abs(sbatchScript)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("bash", "-n", script).CombinedOutput(); err != nil {
		t.Fatalf("bash -n: %v\n%s", err, out)
	}
	stubs := t.TempDir()
	writeStub(t, stubs, "scontrol", `[[ "$1 $2 $3" == 'show hostnames cpu[01-04]' ]] || { echo "unexpected: $*" >&2; exit 1; }
printf 'cpu01\ncpu02\ncpu03\ncpu04\n'`)
	auth := t.TempDir()
	os.Mkdir(filepath.Join(auth, "workers"), 0o700)
	for name, content := range map[string]string{"cpu01.addr": "0.0.0.0:41001", "cpu03.addr": "[::]:41003", "cpu02.exit": "2"} {
		if err := os.WriteFile(filepath.Join(auth, "workers", name), []byte(content+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// DATA: a directory (the script's default) or a bucket's URL, passed
	// to every stoker as it is.
	for _, c := range []struct{ name, data, want string }{
		{"path", "", "/shared/datasets/imagenet/train"},
		{"s3", "s3://my-bucket/imagenet/train", "s3://my-bucket/imagenet/train"},
		{"gs", "gs://my-bucket/imagenet/train", "gs://my-bucket/imagenet/train"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command("bash", "-c", `set -euo pipefail; source "$0"; stoker_peers; echo "$(stoker_failed)|$(stoker_pending)"; stoker_args; `+
				`printf '%s\n' "${WORKER_ARGS[@]}"; echo ---; printf '%s\n' "${COORD_ARGS[@]}"`, script)
			cmd.Env = append(slices.DeleteFunc(os.Environ(), func(e string) bool { return strings.HasPrefix(e, "DATA=") }),
				"PATH="+stubs+":"+os.Getenv("PATH"), "STOKER_SBATCH_SOURCE=1", "AUTH_DIR="+auth,
				"SLURM_JOB_ID=42", "SLURM_JOB_NODELIST=gpu01,cpu[01-04]", "SLURM_JOB_NODELIST_HET_GROUP_1=cpu[01-04]",
				"SLURM_CPUS_ON_NODE=16", "SLURM_CPUS_PER_TASK_HET_GROUP_1=32", "HOME=/home/u")
			if c.data != "" {
				cmd.Env = append(cmd.Env, "DATA="+c.data)
			}
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("sourcing the script: %v\n%s", err, out)
			}
			lines := strings.SplitN(string(out), "\n", 3)
			if len(lines) < 3 {
				t.Fatalf("output:\n%s", out)
			}
			peers, states, rest := lines[0], lines[1], lines[2]
			if want := "cpu01:41001,cpu03:41003"; peers != want {
				t.Errorf("stoker_peers: %q, want %q", peers, want)
			}
			if states != "cpu02 2|cpu04" {
				t.Errorf("stoker_failed|stoker_pending: %q, want %q", states, "cpu02 2|cpu04")
			}
			worker, coord, ok := strings.Cut(strings.TrimSuffix(rest, "\n"), "\n---\n")
			if !ok {
				t.Fatalf("no two command lines in\n%s", out)
			}
			for who, args := range map[string]string{"worker": worker, "coordinator": coord} {
				if !slices.Contains(strings.Split(args, "\n"), "--dataset=imagenet="+c.want) {
					t.Errorf("%s: no --dataset=imagenet=%s in\n%s", who, c.want, args)
				}
			}
			wf, err := serveArgs(strings.Split(worker, "\n"))
			if err != nil {
				t.Errorf("worker: %v", err)
			}
			cf, err := serveArgs(strings.Split(coord, "\n"))
			if err != nil {
				t.Errorf("coordinator: %v", err)
			}
			if cf["peers"] != peers || cf["workers"] != "12" || wf["workers"] != "32" {
				t.Errorf("coordinator --peers %q --workers %q, worker --workers %q; want %q, 12 (16 less the trainer's 4), 32",
					cf["peers"], cf["workers"], wf["workers"], peers)
			}
			if wf["listen"] != "0.0.0.0:0" || cf["listen"] != "127.0.0.1:0" || cf["addr-file"] != auth+"/coordinator.addr" {
				t.Errorf("worker --listen %q, coordinator --listen %q --addr-file %q: want port 0 and the address in a file", wf["listen"], cf["listen"], cf["addr-file"])
			}
			if _, ok := cf["metrics"]; ok {
				t.Errorf("coordinator --metrics %q without STOKER_METRICS: a fixed port collides on shared nodes", cf["metrics"])
			}
			if wf["auth-tokens"] == "" || wf["auth-tokens"] != cf["peer-token-file"] {
				t.Errorf("workers' --auth-tokens %q, coordinator's --peer-token-file %q: want the same per-job file", wf["auth-tokens"], cf["peer-token-file"])
			}
		})
	}
}

func writeStub(t *testing.T, dir, name, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/bash\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

// The trainer of TestSlurmJob: this test binary, run by the stub python
// that the script's `python train.py` finds first on PATH.
func init() {
	if os.Getenv("STOKER_TEST_TRAINER") == "1" {
		if err := slurmTrainer(); err != nil {
			fmt.Fprintln(os.Stderr, "trainer:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
}

// slurmTrainer takes at least STOKER_TEST_BATCHES batches from
// STOKER_ADDR, with a step of 0.3 s (so that the coordinator publishes
// status a few times an epoch), and leaves an epoch's batches after the
// coordinator's status first carried a recommendation: the advisor waits
// out the job's start (its telemetry window) first, which a loaded machine
// may stretch past any fixed count of batches, and `stoker status
// --epochs` then has an epoch's polls to see the advice before the job
// goes.
func slurmTrainer() error {
	n, err := strconv.Atoi(os.Getenv("STOKER_TEST_BATCHES"))
	if err != nil {
		return err
	}
	c, err := client.New(os.Getenv("STOKER_ADDR"))
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const batchSize, samples = 4, 16
	l := c.Loader(&stokerv1.JobSpec{Dataset: "imagenet", Transform: &stokerv1.TransformSpec{Preset: "imagenet-eval"}, BatchSize: batchSize, Seed: 1})
	defer l.Close()
	taken, advisedAt := 0, -1
	for taken < n || advisedAt < 0 || taken-advisedAt < samples/batchSize {
		b, err := l.Next(ctx)
		if err != nil {
			return fmt.Errorf("after %d batches (advice seen after %d): %w", taken, advisedAt, err)
		}
		b.Release()
		taken++
		if advisedAt < 0 {
			st, err := c.Status(ctx)
			if err != nil {
				return err
			}
			for _, j := range st.GetJobs() {
				if r := j.GetWorkersRecommended(); r > 0 && !math.IsNaN(r) {
					advisedAt = taken
				}
			}
		}
		time.Sleep(300 * time.Millisecond)
	}
	fmt.Println("trainer: took", taken, "batches")
	return nil
}

// TestSlurmJob runs deploy/slurm/stoker.sbatch as sbatch would, twice at
// once on the same "nodes", with real stoker processes and stubs for
// Slurm: srun runs a step's tasks here (the CPU component's once per node,
// with SLURMD_NODENAME set, and records its arguments), scontrol lists the
// nodes (loopback addresses), and python is a trainer that takes three
// epochs. Both jobs find their workers on the ports the workers chose;
// the worker that fails on one node is named, not silently missing; the
// workers' srun gets --cpus-per-task and no --export (so a bucket's AWS_*
// variables reach every worker); at each epoch's end the job says how
// many worker nodes it would have needed; and it leaves nothing behind.
func TestSlurmJob(t *testing.T) {
	parallelTest(t)
	slurmJobs(t, func(data string) (string, []string) { return data, nil })
}

// TestSlurmJobBucket is TestSlurmJob with DATA a bucket's URL: the same
// images in a real S3 server (versitygw on loopback), the credentials in
// the environment sbatch was given, as the script says.
func TestSlurmJobBucket(t *testing.T) {
	parallelTest(t)
	slurmJobs(t, func(data string) (string, []string) {
		s3 := storetest.StartS3(t, t.TempDir())
		s3.CreateBucket(t, "datasets")
		s3.PutTree(t, "datasets", "imagenet/train/", data)
		return s3.URL("datasets", "imagenet/train"), s3.Env()
	})
}

// slurmJobs runs TestSlurmJob's two jobs on the synthetic set that
// source, given its directory, returns as DATA with the environment
// reading it needs.
func slurmJobs(t *testing.T, source func(dir string) (data string, env []string)) {
	bin := stokerBinary(t)
	script, err := filepath.Abs(sbatchScript)
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	if err := bench.WriteSyntheticSet(context.Background(), data, 16, 2, 1); err != nil {
		t.Fatal(err)
	}
	data, dataEnv := source(data)
	stubs := filepath.Join(dir, "stubs")
	os.Mkdir(stubs, 0o755)
	writeStub(t, stubs, "scontrol", `[[ "$1 $2 $3" == "show hostnames $FAKE_NODELIST" ]] || { echo "unexpected: $*" >&2; exit 1; }
printf '%s\n' $FAKE_NODES`)
	// srun: options, then the command. The CPU component's step runs the
	// command once per node (on a broken node with an argument stoker
	// refuses, so that its worker fails at once) and passes SIGTERM on.
	writeStub(t, stubs, "srun", `echo "srun $*" >>"$FAKE_SRUN_LOG"
group=0
while [[ $# -gt 0 && $1 == -* ]]; do
	[[ $1 == --het-group=* ]] && group=${1#*=}
	shift
done
if [[ $group == 1 ]]; then
	pids=()
	trap 'kill -TERM "${pids[@]}" 2>/dev/null' TERM
	for node in $FAKE_NODES; do
		if [[ $node == "$FAKE_BROKEN" ]]; then
			SLURMD_NODENAME=$node "$@" --no-such-flag &
		else
			SLURMD_NODENAME=$node "$@" &
		fi
		pids+=($!)
	done
	until wait; do :; done
	exit 0
fi
exec "$@"`)
	writeStub(t, stubs, "python", `[[ "$*" == train.py ]] || { echo "unexpected: python $*" >&2; exit 1; }
STOKER_TEST_TRAINER=1 exec "$STOKER_TEST_SELF" -test.run='^$'`)

	type result struct {
		out, srun string
		err       error
	}
	run := func(jobID int) result {
		home := filepath.Join(dir, fmt.Sprint("home", jobID))
		os.Mkdir(home, 0o700)
		srunLog := filepath.Join(dir, fmt.Sprint("srun", jobID))
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", script)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "PATH="+stubs+":"+os.Getenv("PATH"), "HOME="+home,
			"STOKER="+bin, "DATA="+data, "TRAINER_CPUS=1", "STOKER_ADVICE_EVERY=200ms",
			fmt.Sprint("SLURM_JOB_ID=", jobID), "SLURM_JOB_NODELIST=127.0.0.1,cpu[1-3]", "SLURM_JOB_NODELIST_HET_GROUP_1=cpu[1-3]",
			"SLURM_CPUS_ON_NODE=2", "SLURM_CPUS_PER_TASK_HET_GROUP_1=1",
			"FAKE_NODELIST=cpu[1-3]", "FAKE_NODES=127.0.0.1 127.0.0.2 127.0.0.3", "FAKE_BROKEN=127.0.0.3", "FAKE_SRUN_LOG="+srunLog,
			"STOKER_TEST_SELF="+self, "STOKER_TEST_BATCHES=12")
		cmd.Env = append(cmd.Env, dataEnv...)
		out, err := cmd.CombinedOutput()
		if ctx.Err() != nil {
			err = fmt.Errorf("still running after 3 minutes: %v", err)
		}
		srun, _ := os.ReadFile(srunLog)
		if _, serr := os.Stat(filepath.Join(home, ".stoker", fmt.Sprint("job-", jobID))); !os.IsNotExist(serr) {
			err = fmt.Errorf("the job's directory is still there (%v); %v", serr, err)
		}
		return result{string(out), string(srun), err}
	}
	results := make([]result, 2)
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() { results[i] = run(100 + i) })
	}
	wg.Wait()

	coordLine := regexp.MustCompile(`(?m)^stoker: coordinator 127\.0\.0\.1:(\d+), workers 127\.0\.0\.1:(\d+),127\.0\.0\.2:(\d+)$`)
	advice := regexp.MustCompile(`(?m)^stoker: job imagenet-r0-\S+ epoch \d+(, its last)?: this job would have needed \d+ worker nodes \(\d+ makers recommended, the coordinator's own cores one of them; \d workers were ready; .+\)$`)
	ports := map[string]int{}
	for i, r := range results {
		t.Logf("job %d:\n%s\nsrun calls:\n%s", 100+i, r.out, r.srun)
		if r.err != nil {
			t.Errorf("job %d: %v", 100+i, r.err)
		}
		m := coordLine.FindStringSubmatch(r.out)
		if m == nil {
			t.Errorf("job %d: no line naming the coordinator and the two workers that started", 100+i)
		} else {
			for _, p := range m[1:] {
				ports[p]++
			}
		}
		if !strings.Contains(r.out, "stoker: the worker on 127.0.0.3 exited (status 2) before it listened") {
			t.Errorf("job %d: the worker that failed on 127.0.0.3 is not named", 100+i)
		}
		if !regexp.MustCompile(`(?m)^trainer: took \d+ batches$`).MatchString(r.out) {
			t.Errorf("job %d: the trainer did not finish", 100+i)
		}
		if !advice.MatchString(r.out) {
			t.Errorf("job %d: no line \"this job would have needed N worker nodes\"", 100+i)
		}
		if !regexp.MustCompile(`(?m)^srun --het-group=1 .*--cpus-per-task=1 `).MatchString(r.srun) {
			t.Errorf("job %d: the workers' srun has no --cpus-per-task", 100+i)
		}
		// A bucket's credentials reach the stokers in the job's
		// environment, which srun passes on unless told otherwise.
		if strings.Contains(r.srun, "--export") {
			t.Errorf("job %d: an srun with --export: the tasks would not get the job's environment (AWS_* for a bucket)", 100+i)
		}
	}
	for p, n := range ports {
		if n > 1 || p == "7070" {
			t.Errorf("port %s used %d times across the two jobs: want each stoker on a port of its own", p, n)
		}
	}
}
