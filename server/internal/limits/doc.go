// Package limits is the server's memory budget: every batch buffer and
// lease comes out of it (Budget), each stream has its account in it, its
// default comes from the machine's or the cgroup's memory, and memory goes
// back to the OS when large streams end. A leaf: the standard library only.
package limits
