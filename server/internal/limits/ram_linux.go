package limits

import "syscall"

// machineMemory is the machine's total RAM, or 8 GiB when the kernel
// will not say.
func machineMemory() int64 {
	var si syscall.Sysinfo_t
	if syscall.Sysinfo(&si) != nil {
		return 8 << 30
	}
	return int64(si.Totalram) * int64(si.Unit)
}
