package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"
	"syscall"

	"github.com/gin-gonic/gin"

	"github.com/perpd/perpd/fsm/wire"
)

// fail writes a refusal body and stops the chain.
func fail(c *gin.Context, status int, code, msg string) {
	c.AbortWithStatusJSON(status, wire.ErrorBody{Error: msg, Code: code})
}

func invalid(c *gin.Context, msg string) { fail(c, http.StatusBadRequest, wire.CodeValidation, msg) }

func notFound(c *gin.Context, what string) {
	fail(c, http.StatusNotFound, wire.CodeNotFound, what+" not found")
}

func unavailable(c *gin.Context, msg string) {
	fail(c, http.StatusServiceUnavailable, wire.CodeUnavailable, msg)
}

// recoverPanics answers a handler's panic with a JSON 500 and logs the
// panic's value and stack, never the request. gin's own recovery dumps
// every request header of a panic that looks like a lost connection
// (EPIPE, ECONNRESET, http.ErrAbortHandler), masking only Authorization,
// so the caller's X-API-Key would reach the log.
func (s *Server) recoverPanics(c *gin.Context) {
	defer func() {
		rec := recover()
		if rec == nil {
			return
		}
		if err, ok := rec.(error); ok && (errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, http.ErrAbortHandler)) {
			// The client is gone: nothing can be answered.
			s.log.Debug("connection lost inside a handler", "route", c.FullPath(), "err", err)
			c.Abort()
			return
		}
		s.log.Error("handler panicked", "route", c.FullPath(), "panic", fmt.Sprint(rec), "stack", string(debug.Stack()))
		fail(c, http.StatusInternalServerError, wire.CodeUnavailable, "internal error")
	}()
	c.Next()
}
