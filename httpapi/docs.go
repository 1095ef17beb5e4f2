package httpapi

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
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
	return cachedDoc{body: body, contentType: contentType, etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
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
		c.Header("ETag", d.etag)
		if c.GetHeader("If-None-Match") == d.etag {
			c.Status(http.StatusNotModified)
			return
		}
		c.Data(http.StatusOK, d.contentType, d.body)
	}
}
