package limits

import "fmt"

// DefaultCoefShare is the share of the memory budget the coefficient cache
// takes by default: 1/DefaultCoefShare.
const DefaultCoefShare = 4

// MinDefaultCoefBudget is the least coefficient cache the default gives:
// under it (a memory budget under 256 MiB) there is none, as a cache of a
// few hundred photos is not worth the budget it takes from batches.
const MinDefaultCoefBudget = 64 << 20

// DefaultCoefBudget is the coefficient cache a server with workers decode
// goroutines has on this machine with the default --coef-budget and
// --memory-budget (bench pipeline's default, to measure what serve does).
func DefaultCoefBudget(workers int) int64 {
	return CoefCacheBytes(0, DefaultMemoryBudget(), workers)
}

// MinMemoryBudget is the smallest memory budget `stoker serve` takes (384
// MiB). The budget divides what the server holds for its work (batch
// buffers, caches, read-ahead); the process holds about 80 MiB besides
// (its code, the runtime, gRPC and decoder state) and about a quarter of
// the budget is in use at once, so that below about 300 MiB its RSS is
// over the budget (238 MiB at 190, 264 at 256: two trainers of 224-pixel
// crops of a bucket's 832-pixel photos), and at 384 under it (353-361).
const MinMemoryBudget = 384 << 20

// CheckMemoryFloor refuses a memory budget (0: the machine's default)
// under MinMemoryBudget, naming both, for a server process whose RSS must
// stay within its budget.
func CheckMemoryFloor(budget int64) error {
	what := "--memory-budget"
	if budget == 0 {
		budget, what = DefaultMemoryBudget(), "the default --memory-budget (half of this machine's or cgroup's memory)"
	}
	if budget < MinMemoryBudget {
		return fmt.Errorf("%s %d (%d MiB) is under the floor of %d (%d MiB): the process holds about 80 MiB of its own beside what the budget "+
			"divides, so under the floor its memory would pass the budget; give --memory-budget %d or more", what, budget, budget>>20,
			MinMemoryBudget, MinMemoryBudget>>20, MinMemoryBudget)
	}
	return nil
}

// CoefCacheBytes is the coefficient cache a server with memoryBudget and
// workers decode goroutines has for the configured budget: that budget
// when positive, none when negative, and for 0 (the default) a quarter of
// memoryBudget on a server that decodes, if that is at least
// MinDefaultCoefBudget.
func CoefCacheBytes(budget, memoryBudget int64, workers int) int64 {
	return cacheBytes(budget, memoryBudget, workers, DefaultCoefShare, MinDefaultCoefBudget)
}

// cacheBytes is a decode cache's size for its configured budget: that
// budget when positive, none when negative, and for 0 (the default)
// memoryBudget/share on a server that decodes (workers > 0), if that is
// at least least.
func cacheBytes(budget, memoryBudget int64, workers int, share, least int64) int64 {
	switch {
	case budget > 0:
		return budget
	case budget < 0 || workers <= 0:
		return 0
	}
	if s := memoryBudget / share; s >= least {
		return s
	}
	return 0
}

// DefaultPartnerShare is the share of the memory budget the partner cache
// (cv.PartnerCache: the multi-image ops' load_image'd images) takes by
// default: 1/DefaultPartnerShare.
const DefaultPartnerShare = 16

// MinDefaultPartnerBudget is the least partner cache the default gives:
// under it (a memory budget under 1 GiB) there is none, as it would hold
// less than a window of 640-pixel images (about 120 MB).
const MinDefaultPartnerBudget = 64 << 20

// PartnerCacheBytes is the partner cache a server with memoryBudget and
// workers decode goroutines has for the configured budget: that budget
// when positive, none when negative, and for 0 (the default) a sixteenth
// of memoryBudget on a server that decodes, if that is at least
// MinDefaultPartnerBudget.
func PartnerCacheBytes(budget, memoryBudget int64, workers int) int64 {
	return cacheBytes(budget, memoryBudget, workers, DefaultPartnerShare, MinDefaultPartnerBudget)
}

// DefaultPartnerBudget is the partner cache a server with workers decode
// goroutines has on this machine with the default --partner-budget and
// --memory-budget.
func DefaultPartnerBudget(workers int) int64 {
	return PartnerCacheBytes(0, DefaultMemoryBudget(), workers)
}
