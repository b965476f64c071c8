package httpapi

import (
	"context"
	"net/http"

	"github.com/rookery/rookery"
)

// Backup takes a backup of the server's embedded store named name ("" : a name from the time) and
// says where it is; cmd provides it where there is an embedded store to back up.
type Backup func(ctx context.Context, name string) (BackupInfo, error)

// BackupInfo describes a backup taken.
type BackupInfo struct {
	Name   string       `json:"name"`
	Dir    string       `json:"dir"`
	Bytes  int64        `json:"bytes"`
	Began  rookery.Time `json:"began_at"`
	TookMS int64        `json:"took_ms"`
}

// backup serves POST /v1/admin/backup (server tokens): a consistent copy of the running server's
// data directory, taken without stopping it (docs/api.md, "Operations").
func (s *server) backup(w http.ResponseWriter, r *http.Request) {
	const op rookery.Op = "httpapi.backup"
	if c, _ := rookery.CallerFrom(r.Context()); !c.Server || c.OnBehalfOf != "" {
		s.problem(w, r, rookery.E(op, rookery.Forbidden, "backups need a server token (not acting for a user)"))
		return
	}
	if s.Backup == nil {
		s.problem(w, r, rookery.E(op, rookery.NotFound, "this server has no embedded store to back up (--store pebble, role all); back DynamoDB up with its point-in-time recovery"))
		return
	}
	var in struct {
		Name string `json:"name"`
	}
	if r.ContentLength != 0 {
		if err := decode(r, &in); err != nil {
			s.problem(w, r, err)
			return
		}
	}
	reply := s.outlast(w) // a large store's backup, to S3 say, may take minutes
	info, err := s.Backup(r.Context(), in.Name)
	reply()
	if err != nil {
		s.problem(w, r, err)
		return
	}
	encode(w, http.StatusCreated, info)
}
