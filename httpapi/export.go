package httpapi

import (
	"bufio"
	"encoding/json"
	"net/http"

	"github.com/rookery/rookery/app"
)

// export serves GET /v1/users/{id}/export: everything Rookery holds about the user, streamed as
// JSON lines (application/x-ndjson), one record {"kind","data"} a line, a page at a time; the last
// line is {"kind":"end","data":{"records":n}}, so a client knows it has all of it. An error before
// the first record is a problem reply; one after it (the status is sent) is an
// {"kind":"error","data":{"detail"}} line instead of the end.
//
// An export of any size, to a client on a slow link, may take longer than the server's timeouts
// allow a whole request: each of its writes gets the write timeout (as a stream's do).
func (s *server) export(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.outlast(w) // each write below gets its own write timeout
	out := &responseOut{w: w, rc: http.NewResponseController(w), timeout: s.writeTimeout()}
	bw := bufio.NewWriterSize(out, 64<<10)
	enc := json.NewEncoder(bw)
	n := 0
	err := s.App.Export(r.Context(), id, func(rec app.ExportRecord) error {
		if n == 0 {
			w.Header().Set("Content-Type", "application/x-ndjson")
			w.Header().Set("Content-Disposition", `attachment; filename="rookery-`+id+`.ndjson"`)
			w.WriteHeader(http.StatusOK)
		}
		n++
		if err := enc.Encode(rec); err != nil {
			return err
		}
		if n%100 == 0 { // a page at a time
			if err := bw.Flush(); err != nil {
				return err
			}
			return out.flush()
		}
		return nil
	})
	if err != nil && n == 0 {
		s.problem(w, r, err)
		return
	}
	if err != nil {
		s.Log.Warn("a data export ended early", "user", id, "records", n, "err", err)
		enc.Encode(app.ExportRecord{Kind: "error", Data: map[string]string{"detail": "the export ended early; request it again"}})
	} else {
		enc.Encode(app.ExportRecord{Kind: "end", Data: map[string]int{"records": n}})
	}
	bw.Flush()
}
