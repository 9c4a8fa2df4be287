package source

import (
	"maps"
	"slices"
	"testing"
)

// TestS3ListHidden: a bucket's listing leaves out keys with a component
// starting with a dot (a dataset's .stoker/manifest, macOS's ._ files), as
// a directory's does, and Stat still finds them.
func TestS3ListHidden(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an S3 server (versitygw)")
	}
	s3Env(t, map[string][]byte{"a/1.jpg": []byte("1"), ".stoker/manifest": []byte("m"), "a/._1.jpg": []byte("x"),
		"a/.cache/2.jpg": []byte("2"), "._top.tar": []byte("t"), "b.c/3.jpg": []byte("3")})
	st, err := Open(t.Context(), "s3://bkt/data", WithPolicy(fastPolicy()))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if got := slices.Sorted(maps.Keys(listAll(t, st))); !slices.Equal(got, []string{"a/1.jpg", "b.c/3.jpg"}) {
		t.Errorf("listed %v, want [a/1.jpg b.c/3.jpg]", got)
	}
	if o, err := st.Stat(t.Context(), ".stoker/manifest"); err != nil || o.Size != 1 {
		t.Errorf("Stat(.stoker/manifest) = %+v, %v", o, err)
	}
}
