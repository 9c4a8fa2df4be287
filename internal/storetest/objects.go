package storetest

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// opTimeout bounds one helper request, so a store that hangs fails the
// test instead of holding it until go test's own timeout.
const opTimeout = time.Minute

// putWorkers is how many uploads PutTree runs at once.
const putWorkers = 8

// CreateBucket makes bucket through the S3 API.
func (s *S3) CreateBucket(t T, bucket string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if _, err := s.helper.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("create bucket %s: %v", bucket, err)
	}
}

// Put writes data as bucket/key and returns the ETag the store gave it,
// quoted as S3 sends it (what If-Match takes).
func (s *S3) Put(t T, bucket, key string, data []byte) string {
	t.Helper()
	etag, err := s.put(bucket, key, data)
	if err != nil {
		t.Fatal(err)
	}
	return etag
}

func (s *S3) put(bucket, key string, data []byte) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	out, err := s.helper.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(bucket),
		Key:    aws.String(key),
		Body:   bytes.NewReader(data),
	})
	if err != nil {
		return "", fmt.Errorf("put s3://%s/%s: %w", bucket, key, err)
	}
	return aws.ToString(out.ETag), nil
}

// Delete deletes bucket/key through the S3 API, as another writer would.
func (s *S3) Delete(t T, bucket, key string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if _, err := s.helper.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)}); err != nil {
		t.Fatalf("delete s3://%s/%s: %v", bucket, key, err)
	}
}

// PutTree copies every regular file under dir into bucket, the file
// dir/a/b.jpg as the key prefix+"a/b.jpg" (prefix "" or ending in "/"),
// and returns the keys with their ETags. Symbolic links and other
// non-regular files are left out, as a bucket has none.
func (s *S3) PutTree(t T, bucket, prefix, dir string) map[string]string {
	t.Helper()
	var mu sync.Mutex
	etags := map[string]string{}
	err := putTree(dir, prefix, func(key string, data []byte) error {
		etag, err := s.put(bucket, key, data)
		mu.Lock()
		etags[key] = etag
		mu.Unlock()
		return err
	})
	if err != nil {
		t.Fatalf("PutTree %s into s3://%s/%s: %v", dir, bucket, prefix, err)
	}
	return etags
}

// putTree calls put, putWorkers at a time, with each regular file under
// dir: its key (prefix and its slash-separated path in dir) and bytes.
func putTree(dir, prefix string, put func(key string, data []byte) error) error {
	var files []string
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err == nil && e.Type().IsRegular() {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		return err
	}
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
		next = make(chan string)
	)
	for range min(putWorkers, len(files)) {
		wg.Go(func() {
			for p := range next {
				rel, err := filepath.Rel(dir, p)
				var data []byte
				if err == nil {
					data, err = os.ReadFile(p)
				}
				if err == nil {
					err = put(prefix+path.Clean(filepath.ToSlash(rel)), data)
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	for _, p := range files {
		next <- p
	}
	close(next)
	wg.Wait()
	if len(errs) > 0 {
		return fmt.Errorf("%d of %d files failed, the first: %w", len(errs), len(files), errs[0])
	}
	return nil
}
