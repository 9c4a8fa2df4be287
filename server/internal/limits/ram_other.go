//go:build !linux

package limits

// machineMemory is a guess off Linux, where the server is built to
// compile and test, not to serve: 8 GiB.
func machineMemory() int64 { return 8 << 30 }
