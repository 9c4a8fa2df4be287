// Package fmacheck holds the tests that the bytes stoker makes do not
// depend on fused multiply-adds (issue 45). A fused x*y + z rounds once
// where the source rounds twice; Go's spec lets the compiler fuse, and it
// does on arm64, ppc64, s390x, riscv64, loong64 and on amd64 with
// GOAMD64=v3, so the same Go code could give other bytes on another
// machine. Its tests (fmacheck_test.go):
//
//   - compile pipeline/... and internal/... (less the object stores'
//     clients and the tests' stores: notListed) for arm64 (pure Go) and
//     read the assembly (go build -gcflags=-S): no fused instruction the compiler
//     chose, only explicit math.FMA calls (and pipeline's fmaProbe, whose
//     purpose is to fuse where the build does), and no call into a
//     function of package math that fuses, directly or through math's own
//     calls or assembly;
//   - compile the pipeline package with cgo and its tests for amd64 with
//     GOAMD64=v3, read its assembly and that of the module's packages it
//     links the same way, and, on a CPU that runs v3 code, run the
//     pipeline's golden tests in that build: the same hashes as the
//     default (v1) build's;
//   - run the pipeline's golden tests compiled for arm64 (pure Go) under
//     qemu-aarch64 (qemu-user, which make apt-test installs), where arm64's
//     fused instructions are computed as the hardware does: the same
//     hashes; and, where make apt-arm64's cross compiler and arm64
//     libraries are, the same in the arm64 build with cgo, linked
//     statically;
//   - compile each of the pipeline's C files with -mfma and check that the
//     object is the one -ffp-contract=off gives: their pragmas keep GCC
//     from contracting, which it does by default wherever the target has
//     the instructions (arm64).
//
// It has no code of its own.
package fmacheck
