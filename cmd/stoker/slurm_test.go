package main

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSlurmScript checks deploy/slurm/stoker.sbatch without Slurm: bash
// parses it; sourced with the job's variables set and a stub scontrol on
// PATH, its peer list is the CPU component's nodes on the workers' port,
// and both `stoker serve` command lines parse with serve's own flag set.
func TestSlurmScript(t *testing.T) {
	script, err := filepath.Abs("../../deploy/slurm/stoker.sbatch")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("bash", "-n", script).CombinedOutput(); err != nil {
		t.Fatalf("bash -n: %v\n%s", err, out)
	}
	// scontrol show hostnames cpu[01-03]: a stub that expands the one
	// form this test uses and fails on any other call.
	stubs := t.TempDir()
	stub := "#!/bin/bash\n[[ \"$1 $2 $3\" == 'show hostnames cpu[01-03]' ]] || { echo \"unexpected: $*\" >&2; exit 1; }\nprintf 'cpu01\\ncpu02\\ncpu03\\n'\n"
	if err := os.WriteFile(filepath.Join(stubs, "scontrol"), []byte(stub), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "-c", `set -euo pipefail; source "$0"; stoker_peers; stoker_args; `+
		`printf '%s\n' "${WORKER_ARGS[@]}"; echo ---; printf '%s\n' "${COORD_ARGS[@]}"`, script)
	cmd.Env = append(os.Environ(), "PATH="+stubs+":"+os.Getenv("PATH"), "STOKER_SBATCH_SOURCE=1",
		"SLURM_JOB_ID=42", "SLURM_JOB_NODELIST=gpu01,cpu[01-03]", "SLURM_JOB_NODELIST_HET_GROUP_1=cpu[01-03]",
		"SLURM_CPUS_ON_NODE=16", "SLURM_CPUS_PER_TASK_HET_GROUP_1=32", "HOME=/home/u")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sourcing the script: %v\n%s", err, out)
	}
	peers, rest, _ := strings.Cut(string(out), "\n")
	if want := "cpu01:7070,cpu02:7070,cpu03:7070"; peers != want {
		t.Errorf("stoker_peers: %q, want %q", peers, want)
	}
	worker, coord, ok := strings.Cut(strings.TrimSuffix(rest, "\n"), "\n---\n")
	if !ok {
		t.Fatalf("no two command lines in\n%s", out)
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
	if _, wp, _ := net.SplitHostPort(wf["listen"]); !strings.HasSuffix(peers, ":"+wp) {
		t.Errorf("workers listen on %q, the coordinator dials %q", wf["listen"], peers)
	}
	if wf["auth-tokens"] == "" || wf["auth-tokens"] != cf["peer-token-file"] {
		t.Errorf("workers' --auth-tokens %q, coordinator's --peer-token-file %q: want the same per-job file", wf["auth-tokens"], cf["peer-token-file"])
	}
}
