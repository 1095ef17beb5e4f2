package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/perpd/perpd/fsm/funds"
	"github.com/perpd/perpd/fsm/wire"
)

// decode reads the body into req, answering 400 or 413 itself on failure.
func (s *Server) decode(c *gin.Context, req any) bool {
	err := decodeBody(c.Request, req)
	if err == nil {
		if msg, held := badTextInRequest(req); held {
			invalid(c, msg)
			return false
		}
		return true
	}
	if errors.Is(err, errBodyTooLarge) {
		fail(c, http.StatusRequestEntityTooLarge, wire.CodeBodyTooLarge, "request body exceeds "+strconv.Itoa(MaxBodyBytes)+" bytes")
		return false
	}
	invalid(c, err.Error())
	return false
}

// decodeQuery reads query parameters strictly into a struct of optional
// fields, with the same rules and tags as bodies: a parameter's value is
// taken as the JSON string it would be in a body.
func decodeQuery(c *gin.Context, dst any) error {
	// URL.Query drops each pair it cannot parse (a bad %-escape, a ';'
	// separator): the handler would answer without a parameter the
	// client sent, or past the repeated-parameter rule below.
	q, err := url.ParseQuery(c.Request.URL.RawQuery)
	if err != nil {
		return &decodeError{msg: "query is not well formed: parameters are name=value pairs joined by &, with % only in %XX escapes"}
	}
	obj := map[string]json.RawMessage{}
	for name, vals := range q {
		if len(vals) == 0 {
			continue
		}
		if len(vals) > 1 && !repeatable(dst, name) {
			// Keeping one value and dropping the others would answer a
			// question the client did not ask.
			return &decodeError{msg: "query " + strconv.Quote(name) + " is given more than once; only a repeatable parameter may be"}
		}
		b, _ := json.Marshal(vals[len(vals)-1])
		obj[name] = b
	}
	raw, _ := json.Marshal(obj)
	err = decodeJSON(raw, dst)
	var de *decodeError
	if errors.As(err, &de) {
		return &decodeError{msg: "query " + de.msg[len("field "):]}
	}
	return err
}

// repeatable reports whether the query struct dst (a pointer) declares
// the parameter name with the tag repeat:"true". Its handler reads every
// value itself (decodeQuery checks the last one like any other).
func repeatable(dst any, name string) bool {
	t := reflect.TypeOf(dst)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return false
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if tag, _, _ := strings.Cut(f.Tag.Get("json"), ","); tag == name {
			return f.Tag.Get("repeat") == "true"
		}
	}
	return false
}

// pageQuery reads limit and beforeSeq.
func (s *Server) pageQuery(c *gin.Context) (limit int, before uint64, ok bool) {
	var q PageQuery
	if err := decodeQuery(c, &q); err != nil {
		invalid(c, err.Error())
		return 0, 0, false
	}
	limit = PageLimitDefault
	if q.Limit != nil {
		limit = int(*q.Limit)
	}
	if q.BeforeSeq != nil {
		before = uint64(*q.BeforeSeq)
	}
	return limit, before, true
}

// pageSeqs cuts a newest-first page out of ascending seqs.
func pageSeqs(seqs []uint64, before uint64, limit int) ([]uint64, *wire.Int) {
	page, next := funds.Page(seqs, before, limit)
	if next == 0 {
		return page, nil
	}
	return page, wire.Ptr(int64(next))
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
