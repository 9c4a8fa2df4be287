package main

// The static binary of the container image: built by `make static` (the
// Dockerfile's own build step), then run alone in an empty root as the
// image's nonroot user, serving a dataset on loopback.

import (
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/stoker-dev/stoker/internal/localnet"
	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// nonroot is distroless's nonroot user and group, the image's USER.
const nonroot = 65532

// buildStatic runs `make static` into dir and returns the binary's path.
func buildStatic(t *testing.T, dir string) string {
	return makeBinary(t, "static", "STATIC_BIN", dir)
}

// makeMu makes the parallel image tests' builds one at a time: make
// static and make gpuhost compile the same packages (-trimpath, tags that
// change only internal/gpu's files), so the second finds the first's in
// the go build cache, where side by side both would compile them.
var makeMu sync.Mutex

// makeBinary runs `make target VAR=dir/stoker` and returns the binary's
// path: the image's own build step.
func makeBinary(t *testing.T, target, binVar, dir string) string {
	t.Helper()
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatalf("the image's build is `make %s`, and there is no make: %v", target, err)
	}
	makeMu.Lock()
	defer makeMu.Unlock()
	bin := filepath.Join(dir, "stoker")
	// A first build of these tags compiles every package again (the
	// cloud SDKs among them), over ten minutes on a loaded 2-core
	// machine: buildCtx's hang guard, not a time the build must keep.
	ctx := buildCtx(t)
	start := time.Now()
	out, err := exec.CommandContext(ctx, "make", "-C", "../..", target, binVar+"="+bin).CombinedOutput()
	if err != nil {
		t.Fatalf("make %s: %v\n%s", target, err, out)
	}
	t.Logf("make %s in %v", target, time.Since(start).Round(time.Millisecond))
	return bin
}

// checkStatic fails unless bin is an ELF with no interpreter and no shared
// libraries, with libjpeg-turbo linked in.
func checkStatic(t *testing.T, bin string) {
	t.Helper()
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("%s has a %v program header: not static", bin, p.Type)
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("%s needs shared libraries %v", bin, libs)
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte("The libjpeg-turbo Project")) {
		t.Errorf("%s: no libjpeg-turbo in it (built without cgo?)", bin)
	}
}

// emptyRoot makes a root with only bin (as /stoker), /tmp and a copy of
// the dataset at src (as /data), all readable by nonroot.
func emptyRoot(t *testing.T, bin, src string) string {
	t.Helper()
	root := t.TempDir()
	b, err := os.ReadFile(bin)
	if err == nil {
		err = errors.Join(os.Chmod(root, 0o755), os.Mkdir(filepath.Join(root, "tmp"), 0o755),
			os.Chmod(filepath.Join(root, "tmp"), 0o1777), os.WriteFile(filepath.Join(root, "stoker"), b, 0o755),
			os.CopyFS(filepath.Join(root, "data"), os.DirFS(src)))
	}
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// chrootAttr runs a process chrooted to root: as root, with the nonroot
// user's ids (as in the image); otherwise in a new user namespace that maps
// this user to root in it. It skips the test where neither is allowed.
func chrootAttr(t *testing.T, root string) *syscall.SysProcAttr {
	t.Helper()
	a := &syscall.SysProcAttr{Chroot: root, Credential: &syscall.Credential{Uid: nonroot, Gid: nonroot}}
	if uid, gid := os.Getuid(), os.Getgid(); uid != 0 {
		a = &syscall.SysProcAttr{
			Chroot: root, Cloneflags: syscall.CLONE_NEWUSER,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: uid, Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: gid, Size: 1}},
		}
	}
	// The binary without arguments prints its usage and exits 2: that it
	// ran at all is the probe.
	probe := exec.Command("/stoker")
	probe.SysProcAttr = a
	var exit *exec.ExitError
	if err := probe.Run(); err != nil && !errors.As(err, &exit) {
		if os.Getuid() == 0 {
			t.Fatalf("chroot to %s as root: %v", root, err)
		}
		t.Skipf("needs root (chroot) or unprivileged user namespaces (user.max_user_namespaces, kernel.unprivileged_userns_clone) to run in an empty root: %v", err)
	}
	return a
}

// TestStaticImageRoot builds the image's binary with `make static`, checks
// that it is static with libjpeg-turbo in it, and runs it as the image
// does: alone in an empty root, as uid 65532, no /etc, no /proc, no shell.
// It must answer health (SERVING, also alone in plaintext on
// --health-listen) and ListDatasets and DescribeJob, serve
// an exact epoch, decode like the dynamic cgo build (the same bytes: the
// libjpeg-turbo path, not the pure-Go one), and exit 0 on SIGTERM.
func TestStaticImageRoot(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the static binary and runs it")
	}
	parallelTest(t)
	bin := buildStatic(t, t.TempDir())
	checkStatic(t, bin)
	src := writeDataset(t, 24, 3, 0)
	root := emptyRoot(t, bin, src)
	attr := chrootAttr(t, root)
	ctx := processTest(t, 5*time.Minute)

	hport, err := localnet.FreePortOn("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	healthAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(hport))
	static := startServe(t, ctx, serveConfig{name: "static", bin: "/stoker", root: root, attr: attr, dataset: "/data", workers: 2,
		args: []string{"--health-listen", healthAddr}})
	dynamic := startServe(t, ctx, serveConfig{name: "dynamic", dataset: src, workers: 2})
	if os.Getuid() == 0 {
		st, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(static.cmd.Process.Pid), "status"))
		if err != nil || !strings.Contains(string(st), "\nUid:\t65532\t65532\t65532\t65532\n") {
			t.Errorf("static server's ids: %v\n%s", err, st)
		}
	}

	conn, err := openConn(static.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hconn, err := openConn(healthAddr) // --health-listen: health alone, plaintext
	if err != nil {
		t.Fatal(err)
	}
	defer hconn.Close()
	for _, c := range []struct{ addr, service string }{
		{static.addr, ""}, {static.addr, "stoker.v1.FeedService"}, {static.addr, "stoker.v1.WorkService"},
		{healthAddr, ""}, {healthAddr, "stoker.v1.WorkService"},
	} {
		cc := conn
		if c.addr == healthAddr {
			cc = hconn
		}
		h, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{Service: c.service})
		if err != nil || h.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health of %q on %s: %v, %v; want SERVING", c.service, c.addr, h, err)
		}
	}
	if _, err := stokerv1.NewFeedServiceClient(hconn).ListDatasets(ctx, &stokerv1.ListDatasetsRequest{}); status.Code(err) != codes.Unimplemented {
		t.Errorf("ListDatasets on the --health-listen port: %v, want Unimplemented (health alone)", err)
	}
	feed := stokerv1.NewFeedServiceClient(conn)
	ls, err := feed.ListDatasets(ctx, &stokerv1.ListDatasetsRequest{})
	if ds := ls.GetDatasets(); err != nil || len(ds) != 1 || ds[0].GetName() != "ds" || ds[0].GetSize() != 24 || len(ds[0].GetClasses()) != 3 {
		t.Errorf("ListDatasets: %v, %v; want ds, 24 samples in 3 classes", ds, err)
	}
	spec := testJob(8, 7)
	dj, err := feed.DescribeJob(ctx, &stokerv1.DescribeJobRequest{Job: spec})
	if err != nil || dj.GetInfo().GetBatches() != 3 {
		t.Errorf("DescribeJob: %v, %v; want 3 batches", dj, err)
	}

	sameEpoch(t, ctx, static, dynamic, spec, 24)

	if err := static.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-static.exited:
		if static.waitErr != nil {
			t.Errorf("exit after SIGTERM: %v, want 0", static.waitErr)
		}
	case <-time.After(hangGuard):
		t.Errorf("still running %v after SIGTERM", hangGuard)
	}
}

// sameEpoch checks that built serves an exact epoch of spec over n
// samples, byte for byte the same as the dynamic cgo build's (the
// libjpeg-turbo path, not the pure-Go one).
func sameEpoch(t *testing.T, ctx context.Context, built, dynamic *serveProc, spec *stokerv1.JobSpec, n int) {
	t.Helper()
	got := consumeEpoch(t, ctx, built.addr, spec, consumeOpts{})
	checkEpoch(t, got, spec, n)
	want := consumeEpoch(t, ctx, dynamic.addr, spec, consumeOpts{})
	for i := range min(len(got.batches), len(want.batches)) {
		if got.batches[i].sum() != want.batches[i].sum() {
			t.Errorf("batch %d: %s's bytes differ from the dynamic cgo build's", i, built.name)
		}
	}
}

// glibc's libraries: all the GPU host's binary may need where it runs
// (distroless/cc has them, and nothing else).
var glibcLibs = []string{"libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2", "libresolv.so.2", "librt.so.1"}

// TestGPUHostImageRoot builds the GPU host's binary with `make gpuhost`
// (libjpeg-turbo linked in, glibc dynamic so NVML can be loaded) and runs
// it in a root holding only it, glibc and the dataset, as distroless/cc
// would: it must need nothing but glibc, serve the same bytes as the
// dynamic build, and have tried NVML (here: no driver), which the static
// binary cannot.
func TestGPUHostImageRoot(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the GPU host's binary and runs it")
	}
	parallelTest(t)
	bin := makeBinary(t, "gpuhost", "GPUHOST_BIN", t.TempDir())
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	libs, err := f.ImportedLibraries()
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range libs {
		if !slices.Contains(glibcLibs, l) && !strings.HasPrefix(l, "ld-linux") { // glibc's loader
			t.Errorf("%s needs %s: want glibc's libraries only %v", bin, l, glibcLibs)
		}
	}
	if b, err := os.ReadFile(bin); err != nil || !bytes.Contains(b, []byte("The libjpeg-turbo Project")) {
		t.Errorf("%s: no libjpeg-turbo in it (%v)", bin, err)
	}
	src := writeDataset(t, 24, 3, 0)
	root := emptyRoot(t, bin, src)
	// The loader and the libraries, where ldd finds them here.
	out, err := exec.Command("ldd", bin).CombinedOutput()
	if err != nil {
		t.Fatalf("ldd %s: %v\n%s", bin, err, out)
	}
	for _, field := range strings.Fields(string(out)) {
		if !strings.HasPrefix(field, "/") {
			continue
		}
		b, err := os.ReadFile(field)
		if err == nil {
			err = os.MkdirAll(filepath.Join(root, filepath.Dir(field)), 0o755)
		}
		if err == nil {
			err = os.WriteFile(filepath.Join(root, field), b, 0o755)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	attr := chrootAttr(t, root)
	ctx := processTest(t, 5*time.Minute)
	gpuhost := startServe(t, ctx, serveConfig{name: "gpuhost", bin: "/stoker", root: root, attr: attr, dataset: "/data", workers: 2})
	dynamic := startServe(t, ctx, serveConfig{name: "dynamic", dataset: src, workers: 2})
	spec := testJob(8, 7)
	sameEpoch(t, ctx, gpuhost, dynamic, spec, 24)
	// NVML was looked for (no driver here), not compiled out.
	recs := gpuhost.findLogs("GPU monitor unavailable: the trainer's wait alone drives the window", nil)
	if len(recs) != 1 || !strings.Contains(fmt.Sprint(recs[0]["reason"]), "libnvidia-ml.so") {
		t.Errorf("GPU monitor log %v: want NVML looked for (libnvidia-ml.so not found)", recs)
	}
}
