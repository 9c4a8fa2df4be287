// Package beneath reads a file below a directory in as few system calls
// as Linux allows, the kernel refusing any way out of the directory
// (openat2 with RESOLVE_BENEATH): pipeline/dataset's fast path for an
// ImageFolder's files, which falls back to os.Root wherever this takes
// nothing. A leaf apart from the system-call wrappers
// (golang.org/x/sys/unix).
package beneath
