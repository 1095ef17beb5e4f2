package httpapi

import (
	"net/http"

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

// recovery turns a panic into a JSON 500 instead of gin's default.
func recovery(c *gin.Context, err any) {
	fail(c, http.StatusInternalServerError, wire.CodeUnavailable, "internal error")
}
