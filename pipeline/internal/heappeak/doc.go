// Package heappeak counts the C heap one thread takes while a function
// runs, for the tests that hold the C decoders' memory bound
// (codec.Header.LibBytes) to what libpng and libwebp really take: it
// replaces malloc, calloc, realloc and free for the whole test binary
// that links it (calling glibc's own), counting each block's usable size
// on the thread that armed it. It also encodes WebPs with libwebp's
// encoder, which the stoker binary does not link.
//
// It is test-only code: only _test.go files import it. Without cgo, or
// off Linux (glibc's __libc_malloc), the package is empty and its tests
// are not built.
package heappeak
