package limits

import (
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

// cgroupMemoryLimit is the memory limit of this process's cgroup, in
// bytes, read under root ("/"; tests give a directory of fake files): the
// lowest limit on the path from its own cgroup up to its hierarchy's mount,
// in cgroup v2 (memory.max) and in cgroup v1's memory controller
// (memory.limit_in_bytes), wherever either is mounted. 0: no limit found.
//
// The process's cgroup comes from /proc/self/cgroup, the hierarchies'
// mount points and roots from /proc/self/mountinfo (in a container without
// its own cgroup namespace, the mount's root is the container's cgroup, so
// its limit is at the mount point itself). Without mountinfo, the usual
// places: /sys/fs/cgroup (v2) and /sys/fs/cgroup/memory (v1).
func cgroupMemoryLimit(root string) int64 {
	data, err := os.ReadFile(filepath.Join(root, "proc/self/cgroup"))
	if err != nil {
		return 0
	}
	var v2Path, v1Path string
	for line := range strings.Lines(string(data)) {
		id, rest, ok1 := strings.Cut(strings.TrimSpace(line), ":")
		controllers, p, ok2 := strings.Cut(rest, ":")
		switch {
		case !ok1 || !ok2:
		case id == "0" && controllers == "":
			v2Path = p
		case hasController(controllers, "memory"):
			v1Path = p
		}
	}
	mounts := cgroupMounts(root)
	limit := int64(0)
	for _, m := range mounts {
		p, file := v2Path, "memory.max"
		if m.v1 {
			p, file = v1Path, "memory.limit_in_bytes"
		}
		if p == "" {
			continue
		}
		if n := lowestLimit(root, m, p, file); n > 0 && (limit == 0 || n < limit) {
			limit = n
		}
	}
	return limit
}

// cgroupMount is where a cgroup hierarchy is mounted: at point, showing
// the hierarchy from its cgroup root.
type cgroupMount struct {
	root, point string
	v1          bool // cgroup v1's memory controller; else cgroup v2
}

// cgroupMounts reads the cgroup v2 and v1 memory mounts from mountinfo,
// or assumes the usual ones.
func cgroupMounts(root string) []cgroupMount {
	data, err := os.ReadFile(filepath.Join(root, "proc/self/mountinfo"))
	if err != nil {
		return []cgroupMount{{root: "/", point: "/sys/fs/cgroup"}, {root: "/", point: "/sys/fs/cgroup/memory", v1: true}}
	}
	var out []cgroupMount
	for line := range strings.Lines(string(data)) {
		// ID parent major:minor root mount-point options [optional...] - fstype source super-options
		f := strings.Fields(line)
		sep := -1
		for i := 6; i < len(f); i++ {
			if f[i] == "-" {
				sep = i
				break
			}
		}
		if len(f) < 5 || sep < 0 || sep+3 >= len(f) {
			continue
		}
		m := cgroupMount{root: unescapeMount(f[3]), point: unescapeMount(f[4])}
		switch fstype := f[sep+1]; {
		case fstype == "cgroup2":
			out = append(out, m)
		case fstype == "cgroup" && hasController(f[sep+3], "memory"):
			m.v1 = true
			out = append(out, m)
		}
	}
	return out
}

// lowestLimit is the lowest limit in file from the cgroup at path p
// (as /proc/self/cgroup names it) up to the mount point of m.
func lowestLimit(root string, m cgroupMount, p, file string) int64 {
	rel := "/"
	if r, ok := strings.CutPrefix(path.Clean(p), m.root); ok && (m.root == "/" || r == "" || r[0] == '/') {
		rel = path.Clean("/" + r)
	}
	limit := int64(0)
	for dir := rel; ; dir = path.Dir(dir) {
		if n := readLimit(filepath.Join(root, m.point, dir, file)); n > 0 && (limit == 0 || n < limit) {
			limit = n
		}
		if dir == "/" {
			return limit
		}
	}
}

// readLimit reads a limit file: a number of bytes, or "max" (v2) or a
// number near 2^63 (v1) for none, which are 0.
func readLimit(name string) int64 {
	data, err := os.ReadFile(name)
	if err != nil {
		return 0
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if err != nil || n <= 0 || n >= 1<<62 {
		return 0
	}
	return n
}

func hasController(list, name string) bool {
	for c := range strings.SplitSeq(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
