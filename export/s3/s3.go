// Package s3 keeps the analytics export's files in an S3 bucket (export.Store), on AWS or any
// S3-compatible endpoint, under the same names as in a directory:
//
//	s3://bucket/prefix/dt=2026-11-22/part-0000000042.parquet
//
// S3 has no rename; a file still appears whole or not at all, because an object does: a file is
// one PutObject, or, from PartSize on, a multipart upload whose completion makes it appear (an
// upload that fails is aborted). Exactly once needs no more: a file's name says which rows it
// holds (date and journal generation), so a second put after a crash writes the same rows under
// the same key. Puts are conditional (If-None-Match: *) and skip an existing object, which saves
// the upload; where an endpoint ignores the condition (an emulator's multipart completion), the
// object is replaced by the same rows.
package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/rookery/rookery/export"
	"github.com/rookery/rookery/internal/awsconf"
)

// Store is an export.Store on a bucket, under a key prefix.
type Store struct {
	c      *awss3.Client
	bucket string
	prefix string // "" or ending in "/"
	// PartSize is the size of a multipart upload's parts; files of at least PartSize are uploaded
	// in parts. 0 means 16 MiB (S3 requires 5 MiB at least, but for the last part).
	PartSize int64
}

var _ export.Store = (*Store)(nil)

// ParseURL splits s3://bucket/prefix; ok is false if u is not an s3:// URL with a bucket.
func ParseURL(u string) (bucket, prefix string, ok bool) {
	rest, ok := strings.CutPrefix(u, "s3://")
	if !ok {
		return "", "", false
	}
	bucket, prefix, _ = strings.Cut(rest, "/")
	return bucket, strings.Trim(prefix, "/"), bucket != ""
}

// New returns the Store of bucket under prefix.
func New(c *awss3.Client, bucket, prefix string) *Store {
	if prefix = strings.Trim(prefix, "/"); prefix != "" {
		prefix += "/"
	}
	return &Store{c: c, bucket: bucket, prefix: prefix}
}

// Has implements export.Store.
func (s *Store) Has(ctx context.Context, name string) (bool, error) {
	_, err := s.c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: &s.bucket, Key: aws.String(s.prefix + name)})
	if err == nil {
		return true, nil
	}
	var nf *types.NotFound
	var api smithy.APIError
	if errors.As(err, &nf) || errors.As(err, &api) && (api.ErrorCode() == "NotFound" || api.ErrorCode() == "NoSuchKey") {
		return false, nil
	}
	return false, err
}

// Put implements export.Store.
func (s *Store) Put(ctx context.Context, name, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	key := s.prefix + name
	part := s.PartSize
	if part <= 0 {
		part = 16 << 20
	}
	if fi.Size() < part {
		_, err = s.c.PutObject(ctx, &awss3.PutObjectInput{Bucket: &s.bucket, Key: &key, Body: f,
			ContentLength: aws.Int64(fi.Size()), IfNoneMatch: aws.String("*"), ContentType: aws.String("application/vnd.apache.parquet")})
	} else {
		err = s.multipart(ctx, key, f, fi.Size(), part)
	}
	if err != nil && !exists(err) {
		return err
	}
	f.Close()
	return os.Remove(path)
}

// exists reports whether err says the object exists already (a conditional put refused).
func exists(err error) bool {
	var re interface{ HTTPStatusCode() int }
	if errors.As(err, &re) && re.HTTPStatusCode() == http.StatusPreconditionFailed {
		return true
	}
	var api smithy.APIError
	return errors.As(err, &api) && api.ErrorCode() == "PreconditionFailed"
}

// multipart uploads f (size bytes) to key in parts of part bytes; the completion is conditional
// and makes the object appear whole. A failed upload is aborted.
func (s *Store) multipart(ctx context.Context, key string, f io.ReaderAt, size, part int64) error {
	up, err := s.c.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: &s.bucket, Key: &key,
		ContentType: aws.String("application/vnd.apache.parquet")})
	if err != nil {
		return err
	}
	abort := func(err error) error {
		s.c.AbortMultipartUpload(context.WithoutCancel(ctx), &awss3.AbortMultipartUploadInput{Bucket: &s.bucket, Key: &key, UploadId: up.UploadId})
		return err
	}
	var parts []types.CompletedPart
	buf := make([]byte, part)
	for n, off := int32(1), int64(0); off < size; n, off = n+1, off+part {
		b := buf[:min(part, size-off)]
		if _, err := f.ReadAt(b, off); err != nil && !errors.Is(err, io.EOF) {
			return abort(err)
		}
		out, err := s.c.UploadPart(ctx, &awss3.UploadPartInput{Bucket: &s.bucket, Key: &key, UploadId: up.UploadId,
			PartNumber: aws.Int32(n), Body: bytes.NewReader(b), ContentLength: aws.Int64(int64(len(b)))})
		if err != nil {
			return abort(fmt.Errorf("part %d: %w", n, err))
		}
		parts = append(parts, types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(n)})
	}
	_, err = s.c.CompleteMultipartUpload(ctx, &awss3.CompleteMultipartUploadInput{Bucket: &s.bucket, Key: &key, UploadId: up.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}, IfNoneMatch: aws.String("*")})
	if err != nil {
		return abort(err)
	}
	return nil
}

// List returns the names of the files under the Store's prefix (for tests and tools).
func (s *Store) List(ctx context.Context) ([]string, error) {
	var names []string
	p := awss3.NewListObjectsV2Paginator(s.c, &awss3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: aws.String(s.prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, o := range page.Contents {
			names = append(names, strings.TrimPrefix(aws.ToString(o.Key), s.prefix))
		}
	}
	return names, nil
}

// Get copies the file name to w (for tests and tools).
func (s *Store) Get(ctx context.Context, name string, w io.Writer) error {
	out, err := s.c.GetObject(ctx, &awss3.GetObjectInput{Bucket: &s.bucket, Key: aws.String(s.prefix + name)})
	if err != nil {
		return err
	}
	defer out.Body.Close()
	_, err = io.Copy(w, out.Body)
	return err
}

// NewClient returns an S3 client configured by o; with an Endpoint (an emulator, MinIO) buckets
// are addressed by path (http://endpoint/bucket/key).
func NewClient(ctx context.Context, o awsconf.Options) (*awss3.Client, error) {
	cfg, err := awsconf.Load(ctx, o)
	if err != nil {
		return nil, fmt.Errorf("cannot load the AWS configuration: %w", err)
	}
	return awss3.NewFromConfig(cfg, func(so *awss3.Options) {
		if o.Endpoint != "" {
			so.BaseEndpoint = aws.String(o.Endpoint)
			so.UsePathStyle = true
		}
		// Multipart objects carry no whole-object checksum to validate; saying so on every read
		// is noise.
		so.DisableLogOutputChecksumValidationSkipped = true
	}), nil
}
