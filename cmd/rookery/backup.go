package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rookery/rookery"
	exports3 "github.com/rookery/rookery/export/s3"
	"github.com/rookery/rookery/httpapi"
	"github.com/rookery/rookery/table/pebble"
)

// backupConfig says where a server writes the backups of its embedded store.
type backupConfig struct{ dir string }

func (c *backupConfig) addFlags(f *pflag.FlagSet) {
	f.StringVar(&c.dir, "backup-dir", "", "where backups of the embedded store go (POST /v1/admin/backup, rookery backup), each in a directory of its name: a directory, or s3://bucket/prefix (--s3-endpoint); empty: <data-dir>/backups")
}

var backupName = regexp.MustCompile(`^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,99}$`)

// backup returns the server's Backup: checkpoint copies the data directory's engines (while the
// server runs) into a directory that becomes the backup, with the generated secret beside them and
// backup.json describing it, once whole. To S3, that directory is staged under <data-dir>/backups
// and uploaded file by file, backup.json last (a backup without it is not whole), then removed.
// One backup at a time.
func (c *backupConfig) backup(cfg *config, checkpoint func(ctx context.Context, dir string) error) httpapi.Backup {
	dataDir := cfg.dataDir
	root, remote := c.dir, ""
	if strings.HasPrefix(root, "s3://") {
		root, remote = "", strings.TrimRight(root, "/")
	}
	if root == "" {
		root = filepath.Join(dataDir, "backups")
	}
	var mu sync.Mutex
	return func(ctx context.Context, name string) (httpapi.BackupInfo, error) {
		const op rookery.Op = "backup"
		began := time.Now().UTC()
		if name == "" {
			name = began.Format("20060102T150405.000Z")
		}
		if !backupName.MatchString(name) {
			return httpapi.BackupInfo{}, rookery.FieldErrors{{Name: "name", Reason: "must be 1 to 100 characters of A-Z, a-z, 0-9, _, - and . (not first)"}}.Err(op)
		}
		mu.Lock()
		defer mu.Unlock()
		dir := filepath.Join(root, name)
		var st *exports3.Store
		if remote != "" {
			var err error
			if st, err = cfg.s3Store(ctx, remote+"/"+name); err != nil {
				return httpapi.BackupInfo{}, rookery.E(op, rookery.Internal, err)
			}
			if has, err := st.Has(ctx, "backup.json"); err != nil || has {
				if err != nil {
					return httpapi.BackupInfo{}, rookery.E(op, rookery.Unavailable, "the backup bucket does not answer", err)
				}
				return httpapi.BackupInfo{}, rookery.E(op, rookery.Conflict, "a backup of that name exists")
			}
		} else if _, err := os.Stat(dir); err == nil {
			return httpapi.BackupInfo{}, rookery.E(op, rookery.Conflict, "a backup of that name exists")
		}
		partial := dir + ".partial"
		os.RemoveAll(partial) // a backup that failed half-way before
		if err := os.MkdirAll(root, 0o700); err != nil {
			return httpapi.BackupInfo{}, rookery.E(op, rookery.Internal, err)
		}
		err := checkpoint(ctx, partial)
		if err == nil {
			err = copyFile(filepath.Join(dataDir, "auth.secret"), filepath.Join(partial, "auth.secret"))
			if errors.Is(err, fs.ErrNotExist) {
				err = nil // the secret is configured, not generated
			}
		}
		info := httpapi.BackupInfo{Name: name, Dir: dir, Began: rookery.Time{Time: began}, TookMS: time.Since(began).Milliseconds()}
		if err == nil {
			b, _ := json.MarshalIndent(map[string]any{"name": name, "began_at": began, "version": version, "took_ms": info.TookMS}, "", "  ")
			err = os.WriteFile(filepath.Join(partial, "backup.json"), append(b, '\n'), 0o600)
		}
		if err == nil && st != nil {
			info.Dir = remote + "/" + name
			if info.Bytes, err = dirSize(partial); err == nil {
				err = upload(ctx, st, partial)
			}
			os.RemoveAll(partial)
			if err != nil {
				return httpapi.BackupInfo{}, rookery.E(op, rookery.Unavailable, "uploading the backup failed", err)
			}
			info.TookMS = time.Since(began).Milliseconds()
			return info, nil
		}
		if err == nil {
			err = os.Rename(partial, dir)
		}
		if err != nil {
			os.RemoveAll(partial)
			return httpapi.BackupInfo{}, rookery.E(op, rookery.Internal, err)
		}
		info.Bytes, _ = dirSize(dir)
		return info, nil
	}
}

// upload puts every file under dir to st under its relative path, backup.json last.
func upload(ctx context.Context, st *exports3.Store, dir string) error {
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == "backup.json" && filepath.Dir(path) == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		return st.Put(ctx, filepath.ToSlash(rel), path)
	})
	if err != nil {
		return err
	}
	return st.Put(ctx, "backup.json", filepath.Join(dir, "backup.json"))
}

func dirSize(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return err
	})
	return n, err
}

// copyFile copies src to dst (a new file, mode 0600), synced.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// backupCmd asks a running server for a backup (POST /v1/admin/backup).
func backupCmd(cfg *config, stdout io.Writer) *cobra.Command {
	var server, name string
	cmd := &cobra.Command{
		Use:   "backup",
		Short: "Take a consistent backup of a running server's embedded store, without stopping it",
		Long: "Ask the server at --server for a backup of its data directory (store, event log, timelines, generated secret).\n" +
			"It lands in the server's --backup-dir (default <data-dir>/backups), in a directory named --name (default: the time).\n" +
			"Bring it back with `rookery restore`.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := newAPIClient(cfg, server, 1)
			if err != nil {
				return err
			}
			var body []byte
			if name != "" {
				body, _ = json.Marshal(map[string]string{"name": name})
			}
			// A large store's backup may take minutes.
			out, err := c.doLong(cmd.Context(), "POST", "/v1/admin/backup", body, "backing up", cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			var info httpapi.BackupInfo
			if err := json.Unmarshal(out, &info); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "backup %s in %s (%.1f MiB, took %d ms)\n", info.Name, info.Dir, float64(info.Bytes)/(1<<20), info.TookMS)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&server, "server", "http://127.0.0.1:8080", "the running server's base URL")
	f.StringVar(&name, "name", "", "the backup's name (default: the time, such as 20261125T131500.000Z)")
	cfg.addClientFlags(f)
	return cmd
}

// restoreCmd makes a data directory from a backup (offline: no server runs on it).
func restoreCmd(cfg *config, stdout io.Writer) *cobra.Command {
	var from string
	cmd := &cobra.Command{
		Use:   "restore",
		Short: "Make --data-dir from a backup (it must not exist, or be empty); then start the server on it",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if from == "" {
				return errors.New("--from is required: the backup's directory")
			}
			dest := cfg.dataDir
			if entries, err := os.ReadDir(dest); err == nil && len(entries) > 0 {
				return fmt.Errorf("--data-dir %s is not empty: restore into a new directory", dest)
			}
			if strings.HasPrefix(from, "s3://") {
				if err := download(cmd.Context(), cfg, from, dest); err != nil {
					return fmt.Errorf("restoring: %w", err)
				}
			} else {
				if _, err := os.Stat(filepath.Join(from, "backup.json")); err != nil {
					return fmt.Errorf("%s is not a whole backup (no backup.json): %w", from, err)
				}
				if err := copyTree(from, dest); err != nil {
					return fmt.Errorf("restoring: %w", err)
				}
			}
			// The copy must open: a store that does not is no restore. (Opening reads no cursor,
			// so any cursor key does.)
			db, err := pebble.Open(pebble.Options{Dir: filepath.Join(dest, "store"), Clock: rookery.SystemClock, CursorKey: []byte("restore")})
			if err != nil {
				return fmt.Errorf("the restored store does not open: %w", err)
			}
			if err := db.Close(); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "restored %s into %s; start it with: rookery serve --data-dir %s\n", from, dest, dest)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&from, "from", "", "the backup's directory, or its s3://bucket/prefix/name (as `rookery backup` printed it)")
	f.StringVar(&cfg.dataDir, "data-dir", "./data", "the data directory to make (must not exist, or be empty)")
	cfg.addAWSFlags(f)
	return cmd
}

// download copies the backup at the s3:// URL from into dest; backup.json, written last, must be
// there (else the upload did not finish).
func download(ctx context.Context, cfg *config, from, dest string) error {
	st, err := cfg.s3Store(ctx, strings.TrimRight(from, "/"))
	if err != nil {
		return err
	}
	if has, err := st.Has(ctx, "backup.json"); err != nil || !has {
		if err != nil {
			return err
		}
		return fmt.Errorf("%s is not a whole backup (no backup.json)", from)
	}
	names, err := st.List(ctx)
	if err != nil {
		return err
	}
	for _, name := range names {
		if name == "backup.json" {
			continue
		}
		path := filepath.Join(dest, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return err
		}
		f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err != nil {
			return err
		}
		err = st.Get(ctx, name, f)
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

// copyTree copies the regular files under src to dst, keeping the layout (directories 0700).
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if rel == "backup.json" {
			return nil
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o700)
		}
		return copyFile(path, target)
	})
}
