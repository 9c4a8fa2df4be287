package limits

import (
	"os"
	"path/filepath"
	"testing"
)

// TestCgroupMemoryLimit reads fake /proc and /sys/fs/cgroup trees as the
// kernel lays them out for cgroup v2 and v1, in and out of cgroup
// namespaces, and a hybrid host (v2 mounted without the memory controller,
// v1's memory controller in use).
func TestCgroupMemoryLimit(t *testing.T) {
	const (
		v2Mount    = "30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n"
		rootMount  = "23 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
		unlimited1 = "9223372036854771712\n"
	)
	for _, c := range []struct {
		name  string
		files map[string]string
		want  int64
	}{
		{"v2, own cgroup namespace (a Kubernetes pod)", map[string]string{
			"proc/self/cgroup":           "0::/\n",
			"proc/self/mountinfo":        rootMount + v2Mount,
			"sys/fs/cgroup/memory.max":   "1073741824\n",
			"sys/fs/cgroup/cpu.max":      "max 100000\n",
			"sys/fs/cgroup/memory.high":  "max\n",
			"sys/fs/cgroup/memory.stat":  "anon 0\n",
			"sys/fs/cgroup/cgroup.procs": "1\n",
		}, 1 << 30},
		{"v2, the host's hierarchy: the limit on an ancestor", map[string]string{
			"proc/self/cgroup":    "0::/kubepods.slice/pod1.slice/cri-abc.scope\n",
			"proc/self/mountinfo": rootMount + v2Mount,
			"sys/fs/cgroup/kubepods.slice/pod1.slice/cri-abc.scope/memory.max": "max\n",
			"sys/fs/cgroup/kubepods.slice/pod1.slice/memory.max":               "2147483648\n",
			"sys/fs/cgroup/kubepods.slice/memory.max":                          "8589934592\n",
		}, 2 << 30},
		{"v2, no limit anywhere", map[string]string{
			"proc/self/cgroup":                    "0::/user.slice/session-1.scope\n",
			"proc/self/mountinfo":                 rootMount + v2Mount,
			"sys/fs/cgroup/user.slice/memory.max": "max\n",
		}, 0},
		{"v1, container without a cgroup namespace (mount root is its cgroup)", map[string]string{
			"proc/self/cgroup": "12:memory:/docker/abc\n11:cpu,cpuacct:/docker/abc\n1:name=systemd:/docker/abc\n",
			"proc/self/mountinfo": rootMount +
				"40 30 0:35 /docker/abc /sys/fs/cgroup/memory ro,nosuid,nodev,noexec,relatime master:17 - cgroup cgroup rw,memory\n" +
				"41 30 0:36 /docker/abc /sys/fs/cgroup/cpu,cpuacct ro,nosuid - cgroup cgroup rw,cpu,cpuacct\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes":      "536870912\n",
			"sys/fs/cgroup/cpu,cpuacct/memory.limit_in_bytes": "1024\n", // not the memory controller's
		}, 512 << 20},
		{"v1, the host's hierarchy, memory with another controller", map[string]string{
			"proc/self/cgroup":    "4:memory,hugetlb:/slurm/uid_1000/job_42/step_0\n",
			"proc/self/mountinfo": rootMount + "40 30 0:35 / /sys/fs/cgroup/memory,hugetlb rw - cgroup cgroup rw,memory,hugetlb\n",
			"sys/fs/cgroup/memory,hugetlb/memory.limit_in_bytes":                              unlimited1,
			"sys/fs/cgroup/memory,hugetlb/slurm/memory.limit_in_bytes":                        unlimited1,
			"sys/fs/cgroup/memory,hugetlb/slurm/uid_1000/job_42/memory.limit_in_bytes":        "68719476736\n",
			"sys/fs/cgroup/memory,hugetlb/slurm/uid_1000/job_42/step_0/memory.limit_in_bytes": unlimited1,
		}, 64 << 30},
		{"v1, unlimited", map[string]string{
			"proc/self/cgroup":                           "7:memory:/\n",
			"proc/self/mountinfo":                        rootMount + "40 30 0:35 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes": unlimited1,
		}, 0},
		{"hybrid: v2 without the memory controller, v1's in use", map[string]string{
			"proc/self/cgroup": "0::/user.slice\n5:memory:/user.slice\n",
			"proc/self/mountinfo": rootMount +
				"31 30 0:27 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n" +
				"32 30 0:28 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n",
			"sys/fs/cgroup/unified/user.slice/cgroup.procs":         "1\n",
			"sys/fs/cgroup/memory/user.slice/memory.limit_in_bytes": "3221225472\n",
		}, 3 << 30},
		{"no mountinfo: the usual places", map[string]string{
			"proc/self/cgroup":                           "3:memory:/\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "805306368\n",
		}, 768 << 20},
		{"a mount point with a space", map[string]string{
			"proc/self/cgroup":            "0::/\n",
			"proc/self/mountinfo":         rootMount + `30 23 0:26 / /sys/fs/my\040cgroup rw - cgroup2 cgroup2 rw` + "\n",
			"sys/fs/my cgroup/memory.max": "4096\n",
		}, 4096},
		{"no /proc", map[string]string{}, 0},
		{"garbage", map[string]string{
			"proc/self/cgroup":         "nonsense\n0::\n::::\n",
			"proc/self/mountinfo":      "- - -\n1 2 3\n",
			"sys/fs/cgroup/memory.max": "12 34\n",
		}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			for name, content := range c.files {
				p := filepath.Join(root, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if got := cgroupMemoryLimit(root); got != c.want {
				t.Errorf("cgroupMemoryLimit = %d, want %d", got, c.want)
			}
		})
	}
}

// TestMemoryBudgetOf: half of the machine's memory, or of a lower cgroup
// limit; a limit above the machine's (v1's "unlimited" page-rounded
// maximum is filtered earlier) does not raise it.
func TestMemoryBudgetOf(t *testing.T) {
	for _, c := range []struct{ total, limit, want int64 }{
		{16 << 30, 0, 8 << 30},
		{16 << 30, 1 << 30, 512 << 20},
		{16 << 30, 32 << 30, 8 << 30},
	} {
		if got := memoryBudgetOf(c.total, c.limit); got != c.want {
			t.Errorf("memoryBudgetOf(%d, %d) = %d, want %d", c.total, c.limit, got, c.want)
		}
	}
	if b := DefaultMemoryBudget(); b <= 0 {
		t.Errorf("DefaultMemoryBudget on this machine = %d", b)
	}
}
