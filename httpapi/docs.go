package httpapi

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/gin-gonic/gin"
)

// docCache holds the generated documents. They depend only on the route
// table and the node's configuration, both fixed once New returns, so they
// are built once per server on first request and served as bytes.
type docCache struct {
	once sync.Once
	docs map[string]cachedDoc
	// builds counts generations (a test checks there is one).
	builds atomic.Int32
}

type cachedDoc struct {
	body        []byte
	contentType string
	etag        string
	// gz is body gzipped once at build, served to a client that accepts
	// gzip (the OpenAPI description is a few hundred KB of repetitive
	// JSON, read by every agent that starts); gzEtag names that
	// representation, as a strong ETag must.
	gz     []byte
	gzEtag string
}

// Names of the cached documents.
const (
	docOpenAPI  = "openapi"
	docAsyncAPI = "asyncapi"
	docLLMS     = "llms"
	docLLMSFull = "llms-full"
)

func (s *Server) buildDocs() {
	s.docs.builds.Add(1)
	spec, err := json.Marshal(s.OpenAPI())
	if err != nil {
		panic("httpapi: openapi: " + err.Error())
	}
	const text = "text/plain; charset=utf-8"
	s.docs.docs = map[string]cachedDoc{
		docOpenAPI:  newCachedDoc(spec, "application/json; charset=utf-8"),
		docLLMS:     newCachedDoc([]byte(s.LLMSText(false)), text),
		docLLMSFull: newCachedDoc([]byte(s.LLMSText(true)), text),
	}
	if doc, ok := s.AsyncAPI(); ok {
		b, err := json.Marshal(doc)
		if err != nil {
			panic("httpapi: asyncapi: " + err.Error())
		}
		s.docs.docs[docAsyncAPI] = newCachedDoc(b, "application/json; charset=utf-8")
	}
}

func newCachedDoc(body []byte, contentType string) cachedDoc {
	sum := sha256.Sum256(body)
	tag := hex.EncodeToString(sum[:12])
	var gz bytes.Buffer
	w, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression) // the level is valid
	_, _ = w.Write(body)                                   // a bytes.Buffer does not fail
	_ = w.Close()
	return cachedDoc{body: body, contentType: contentType, etag: `"` + tag + `"`, gz: gz.Bytes(), gzEtag: `"` + tag + `-gzip"`}
}

// acceptsGzip reports whether an Accept-Encoding header value accepts
// gzip: named with a q above 0, or not named and * is (RFC 9110 12.5.3).
func acceptsGzip(header string) bool {
	gzipQ, starQ := -1.0, -1.0
	for _, part := range strings.Split(header, ",") {
		coding, params, _ := strings.Cut(part, ";")
		q := 1.0
		for _, p := range strings.Split(params, ";") {
			if k, v, ok := strings.Cut(strings.TrimSpace(p), "="); ok && strings.EqualFold(k, "q") {
				if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
					q = f
				}
			}
		}
		switch strings.ToLower(strings.TrimSpace(coding)) {
		case "gzip", "x-gzip":
			gzipQ = q
		case "*":
			starQ = q
		}
	}
	if gzipQ >= 0 {
		return gzipQ > 0
	}
	return starQ > 0
}

// serveDoc answers with a cached document, or 304 when the client holds it.
func (s *Server) serveDoc(name string) gin.HandlerFunc {
	return func(c *gin.Context) {
		s.docs.once.Do(s.buildDocs)
		d, ok := s.docs.docs[name]
		if !ok { // /asyncapi.json on a server without a WebSocket
			notFound(c, "document "+c.Request.URL.Path+" (this server mounts no WebSocket)")
			return
		}
		body, etag := d.body, d.etag
		gz := acceptsGzip(c.GetHeader("Accept-Encoding"))
		if gz {
			body, etag = d.gz, d.gzEtag
		}
		c.Header("Vary", "Accept-Encoding")
		c.Header("ETag", etag)
		if c.GetHeader("If-None-Match") == etag {
			c.Status(http.StatusNotModified)
			return
		}
		if gz {
			c.Header("Content-Encoding", "gzip")
		}
		c.Data(http.StatusOK, d.contentType, body)
	}
}
