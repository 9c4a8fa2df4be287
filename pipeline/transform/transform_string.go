package transform

import (
	"fmt"
	"strings"

	optab "github.com/stoker-dev/stoker/pipeline/ops"
)

// String describes the op list in torchvision terms; a transform of
// several views, each group's count and op list.
func (t *Transform) String() string {
	if t.views == nil {
		return optab.OpsString(t.ops) + t.stopString()
	}
	var b strings.Builder
	b.WriteString("views[")
	for v := 0; v < len(t.views); {
		n := 1
		for v+n < len(t.views) && t.views[v+n] == t.views[v] {
			n++
		}
		if v > 0 {
			b.WriteString("; ")
		}
		if name := t.viewNames[v]; name != "" {
			fmt.Fprintf(&b, "%s: ", name)
		}
		fmt.Fprintf(&b, "%d x (%s)", n, optab.OpsString(t.views[v].ops))
		v += n
	}
	b.WriteString("]")
	return b.String()
}
